package lockclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// send carries out the state machine's Send (on the executor): one HTTP
// attempt of msg at the endpoint to, on a goroutine of the attempts' pool
// (an event must not wait for the network: the watchdog has to fire on
// time). Only the latest attempt's outcome goes back to the state machine:
// a new attempt cancels the one before (the state machine has stopped
// waiting for it, and would drop its reply as stale anyway). A lock that
// has ended sends nothing.
func (l *Lock) send(to process.NodeID, msg process.Message) {
	if l.over {
		return
	}
	var path string
	var body any
	var req uint64
	esc := url.PathEscape(l.resource)
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		path, req = "/v1/locks/"+esc+"/acquire", m.Request
		body = lockapi.AcquireRequest{Client: m.Client, TTLms: m.TTL.Milliseconds(), RequestID: l.requestID(m.Request), WaitMs: m.Wait.Milliseconds()}
	case lockservice.RenewRequest:
		path, req = "/v1/locks/"+esc+"/renew", m.Request
		body = lockapi.RenewRequest{Client: m.Client, Token: lockapi.Token(m.Token), TTLms: l.ttl.Milliseconds()}
	case lockservice.ReleaseRequest:
		path, req = "/v1/locks/"+esc+"/release", m.Request
		// The same request_id on every attempt: a retry of a release that
		// took effect (its answer lost to a change of leader) is answered
		// released, not not-holder.
		body = lockapi.ReleaseRequest{Client: m.Client, Token: lockapi.Token(m.Token), RequestID: l.requestID(m.Request)}
	default:
		panic(fmt.Sprintf("lockclient: the state machine sent a %T", msg))
	}
	payload, _ := json.Marshal(body) // plain structs: cannot fail
	if l.cancel != nil {
		l.cancel()
	}
	l.gen++
	gen := l.gen
	// No timeout of its own: the state machine's request timer (the
	// renewal's next third of the TTL) ends the attempt by sending the
	// next one, and the end of the lock ends the one in flight (end).
	// Not a child of a context of the lock's: that would make every
	// attempt a registration in the lock's context, and the transport's
	// context of the request one more in this one.
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	base := l.servers[to]
	attempts.Go(func() {
		a := l.c.attempt(ctx, base, path, payload, l.servers)
		cancel()
		l.ex.post(func() {
			if gen == l.gen {
				l.answer(req, msg, a)
			}
		})
	})
}

// requestID is the lockapi request_id of the state machine's request req:
// unique per client (its prefix), per lock, and per request of the lock.
func (l *Lock) requestID(req uint64) string {
	return l.reqPrefix + strconv.FormatUint(req, 36)
}

// outcome is one HTTP attempt: a status and body, or err for no answer.
type outcome struct {
	base   string // the endpoint that answered
	status int
	hdr    http.Header
	body   []byte
	err    error
}

// attempt posts payload to base+path. A redirect to an endpoint not among
// known (the lock's servers) is followed here (at most 3 hops, same body),
// unless the client stays on its endpoints; one to a known endpoint is
// the state machine's to follow.
func (c *Client) attempt(ctx context.Context, base, path string, payload []byte, known []string) outcome {
	for hops := 0; ; hops++ {
		o := c.post(ctx, base, path, payload)
		if o.err != nil || (o.status != http.StatusTemporaryRedirect && o.status != http.StatusPermanentRedirect) || hops == 3 {
			return o
		}
		leader := leaderBase(o.hdr.Get("Location"))
		if leader == "" || slices.Contains(known, leader) || c.cfg.StayOnEndpoints {
			return o
		}
		c.answered(leader) // learn it: later locks start there
		base = leader
	}
}

func (c *Client) post(ctx context.Context, base, path string, payload []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(payload))
	if err != nil {
		return outcome{base: base, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.BearerToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return outcome{base: base, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return outcome{base: base, err: err}
	}
	return outcome{base: base, status: resp.StatusCode, hdr: resp.Header, body: b}
}

// answer hands the outcome of an attempt of request req (msg) to the state
// machine as the reply it stands for (see the package comment), on the
// executor.
func (l *Lock) answer(req uint64, msg process.Message, o outcome) {
	var lr lockapi.LeaseResponse
	if o.err != nil || (o.status == http.StatusOK && jsonv2.Unmarshal(o.body, &lr, lenient) != nil) {
		// No answer: the state machine retries, or its watchdog bounds
		// the lease. A cut or refused connection says so at once.
		l.unanswered = req
		if !l.over {
			l.sm.NoAnswer(req)
		}
		return
	}
	r := lockservice.LockReply{Request: req}
	var hint time.Duration
	switch o.status {
	case http.StatusOK:
		l.c.answered(o.base)
		r.Token, r.TTL = uint64(lr.Token), time.Duration(lr.TTLms)*time.Millisecond
		switch msg.(type) {
		case lockservice.AcquireRequest:
			if lr.TokenMAC != "" {
				if l.macs == nil {
					l.macs = map[uint64]string{}
				}
				l.macs[r.Token] = lr.TokenMAC
			}
			r.Status = lockservice.Granted
			r.Waited = time.Duration(lr.WaitedMs) * time.Millisecond
		case lockservice.RenewRequest:
			r.Status = lockservice.Renewed
		default:
			r.Status = lockservice.Released
		}
		l.sm.ReceiveHint(r, 0)
		return
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		r.Status, r.Leader = lockservice.NotLeader, lockservice.NoLeader
		if i := slices.Index(l.servers, leaderBase(o.hdr.Get("Location"))); i >= 0 {
			r.Leader = process.NodeID(i)
		} else if i := slices.Index(l.servers, o.base); i >= 0 && l.c.cfg.StayOnEndpoints {
			// A leader this client does not reach directly: one of its
			// other endpoints leads there, so the next is asked at once
			// (as a named leader is, within the redirect limit), not
			// after the backoff of an election.
			next := i + 1
			if next == len(l.servers) {
				next = 0
			}
			r.Leader = process.NodeID(next)
		}
		l.sm.ReceiveHint(r, 0)
		return
	}
	se := &StatusError{Status: o.status, Unanswered: l.unanswered == req}
	if jsonv2.Unmarshal(o.body, &se.Body, lenient) != nil {
		se.Body.Message = string(o.body)
	}
	l.last = se
	switch {
	case o.status == http.StatusConflict && se.Body.Error == lockapi.CodeHeld:
		r.Status, hint = lockservice.Busy, time.Duration(se.Body.RetryAfterMs)*time.Millisecond
	case o.status == http.StatusConflict && se.Body.Error == lockapi.CodeNotHolder:
		r.Status = lockservice.NotHolder
	case o.status == http.StatusTooManyRequests:
		r.Status, hint = lockservice.Overloaded, retryAfter(o.hdr, se.Body)
	case o.status == http.StatusServiceUnavailable:
		// Draining, or cut off from its backend or quorum: another
		// instance may serve.
		r.Status, r.Leader, hint = lockservice.NotLeader, lockservice.NoLeader, retryAfter(o.hdr, se.Body)
	default:
		r.Status, r.Err = lockservice.Invalid, se.Error()
	}
	l.sm.ReceiveHint(r, hint)
}

// lenient reads a server's answer with encoding/json's (v1) leniency
// about names: any case, a name given twice the last one; unknown fields
// are ignored. Stricter than v1: invalid UTF-8 is refused, and a 200 whose
// fields have the wrong types is no answer (v1 granted on what it could
// decode). (A lease answer: v2 about a quarter of the time of v1's check
// and decode, one allocation against eight.)
var lenient = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsontext.AllowDuplicateNames(true))

// retryAfter is the server's hint: retry_after_ms in the body when
// present (finer), else the Retry-After header in seconds.
func retryAfter(h http.Header, e lockapi.ErrorResponse) time.Duration {
	if e.RetryAfterMs > 0 {
		return time.Duration(e.RetryAfterMs) * time.Millisecond
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// leaderBase is scheme://host of a Location header.
func leaderBase(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
