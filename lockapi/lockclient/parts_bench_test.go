//go:build unix

package lockclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// BenchmarkCycleParts splits the CPU of an acquire→release cycle over
// HTTP between net/http and this project's two layers on it, the Go
// client and the lock API's server. Each of the four pairs runs 8
// workers, a lock each, against the in-memory backend on loopback, and
// reports cpu-µs/cycle: the user and system CPU of the whole process
// (both ends of the connection) per cycle.
//
//   - client=go: this package's Client (the simulator's state machine
//     on an executor, its timers, the attempts' pool);
//   - client=plain: net/http's Client posting the same JSON bodies and
//     reading the token, nothing else;
//   - server=api: lockapi.Server (admission, body limits and timeouts,
//     the strict decoder, metrics);
//   - server=bare: a net/http handler that decodes the body leniently and
//     calls the same backend.
//
// plain/bare is what net/http alone costs a cycle: the floor under any
// client and server built on it (docs/performance.md uses it to bound
// lockd's share of raw Redis).
//
//	go test -run '^$' -bench CycleParts -benchtime 30000x ./lockapi/lockclient
func BenchmarkCycleParts(b *testing.B) {
	const workers = 8
	for _, server := range []string{"api", "bare"} {
		for _, client := range []string{"go", "plain"} {
			b.Run("client="+client+"/server="+server, func(b *testing.B) {
				mem := lockapitest.NewMem()
				var base string
				if server == "api" {
					_, base = lockapitest.Serve(b, mem, lockapi.Config{})
				} else {
					base = serveBare(b, mem)
				}
				if client == "plain" {
					runParts(b, workers, plainCycler(base, workers))
					return
				}
				c, err := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				runParts(b, workers, func(ctx context.Context, _ int, res string) error {
					l, err := c.TryAcquire(ctx, res, 10*time.Second)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				})
			})
		}
	}
}

// runParts runs b.N cycles over workers goroutines, a resource each, and
// reports the process's CPU per cycle.
func runParts(b *testing.B, workers int, cycle func(ctx context.Context, w int, res string) error) {
	ctx := context.Background()
	for w := range workers { // one cycle each first: connections made, stacks grown
		if err := cycle(ctx, w, "r"+strconv.Itoa(w)); err != nil {
			b.Fatal(err)
		}
	}
	per := b.N/workers + 1
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU(b)
	for w := range workers {
		wg.Go(func() {
			res := "r" + strconv.Itoa(w)
			for range per {
				if err := cycle(ctx, w, res); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Microsecond)/float64(per*workers), "cpu-µs/cycle")
}

// processCPU is the process's user and system CPU so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bareRequest is the fields of the lock API's acquire and release bodies
// the bare handler reads.
type bareRequest struct {
	Client    string        `json:"client"`
	TTLms     int64         `json:"ttl_ms"`
	RequestID string        `json:"request_id"`
	Token     lockapi.Token `json:"token"`
}

// serveBare serves acquire and release over b with nothing but net/http's
// mux and encoding/json, answering as the lock API does where the Go
// client reads the answer (a lease's token and TTL; a 409 when held).
func serveBare(tb testing.TB, backend lockapi.Backend) string {
	read := func(w http.ResponseWriter, r *http.Request) (bareRequest, bool) {
		var q bareRequest
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &q)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return q, false
		}
		return q, true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/locks/{resource}/acquire", func(w http.ResponseWriter, r *http.Request) {
		q, ok := read(w, r)
		if !ok {
			return
		}
		ttl := time.Duration(q.TTLms) * time.Millisecond
		l, err := backend.Acquire(r.Context(), r.PathValue("resource"), q.Client, ttl, 0, q.RequestID)
		if err != nil {
			http.Error(w, `{"error":"held"}`, http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"token":"`+strconv.FormatUint(l.Token, 10)+`","ttl_ms":`+strconv.FormatInt(l.TTL.Milliseconds(), 10)+`}`)
	})
	mux.HandleFunc("POST /v1/locks/{resource}/release", func(w http.ResponseWriter, r *http.Request) {
		q, ok := read(w, r)
		if !ok {
			return
		}
		if err := backend.Release(r.Context(), r.PathValue("resource"), q.Client, uint64(q.Token), q.RequestID); err != nil {
			http.Error(w, `{"error":"not_holder"}`, http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &http.Server{Handler: mux}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	tb.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("bare server: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// plainCycler is a cycle of workers' by net/http's Client alone: the
// acquire and the release posted as the Go client posts them (a fresh
// request_id each), the lease's token read from the answer. Its transport
// keeps as many idle connections as the Go client's.
func plainCycler(base string, workers int) func(ctx context.Context, w int, res string) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	hc := &http.Client{Transport: tr}
	seq := make([]uint64, workers) // a slot a worker: no sharing between goroutines
	post := func(ctx context.Context, url, body string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status + ": " + string(b))
		}
		return b, err
	}
	return func(ctx context.Context, w int, res string) error {
		seq[w]++
		client := `{"client":"plain-` + strconv.Itoa(w) + `",`
		b, err := post(ctx, base+"/v1/locks/"+res+"/acquire", client+`"ttl_ms":10000,"request_id":"`+strconv.FormatUint(seq[w], 10)+`"}`)
		if err != nil {
			return err
		}
		var lease lockapi.LeaseResponse
		if err := json.Unmarshal(b, &lease); err != nil {
			return err
		}
		_, err = post(ctx, base+"/v1/locks/"+res+"/release", client+`"token":"`+strconv.FormatUint(uint64(lease.Token), 10)+`"}`)
		return err
	}
}
