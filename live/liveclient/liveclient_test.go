package liveclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeLocker answers by resource name: "busy" is held, "gone" is not
// held by the caller, "lost" has no answer.
type fakeLocker struct{}

func (fakeLocker) Acquire(_ context.Context, resource string, _ time.Duration) (uint64, error) {
	switch resource {
	case "busy":
		return 0, ErrBusy
	case "lost":
		return 0, errors.New("connection reset")
	}
	return 7, nil
}

func (fakeLocker) Renew(_ context.Context, resource string, _ uint64, _ time.Duration) error {
	if resource == "gone" {
		return ErrNotHolder
	}
	return nil
}

func (fakeLocker) Release(_ context.Context, resource string, _ uint64) error {
	if resource == "gone" {
		return ErrNotHolder
	}
	return nil
}

func (fakeLocker) Close() error { return nil }

// store is a fenced store in miniature: a write below the highest token
// is 409, as fencesim-store answers.
func store(t *testing.T) string {
	var tmax uint64
	var val string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			var tok uint64
			json.Unmarshal([]byte(r.Header.Get("Fencing-Token")), &tok)
			if tok < tmax {
				w.WriteHeader(http.StatusConflict)
				return
			}
			tmax = tok
			b := new(bytes.Buffer)
			b.ReadFrom(r.Body)
			val = b.String()
			w.Write([]byte(`{}`))
		case http.MethodGet:
			if tmax == 0 {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(map[string]string{"value": val, "token": "9"})
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestProtocol(t *testing.T) {
	cmds := []Command{
		{ID: 1, Op: OpAcquire, Resource: "r", TTLms: 1000},
		{ID: 2, Op: OpAcquire, Resource: "busy", TTLms: 1000},
		{ID: 3, Op: OpAcquire, Resource: "lost", TTLms: 1000},
		{ID: 4, Op: OpRenew, Resource: "gone", Token: 7, TTLms: 1000},
		{ID: 5, Op: OpRelease, Resource: "r", Token: 7},
		{ID: 6, Op: OpRead, Key: "k"},
		{ID: 7, Op: OpFly},
	}
	want := map[uint64]Reply{
		1: {ID: 1, OK: true, Token: 7},
		2: {ID: 2, Error: ErrorBusy},
		3: {ID: 3, Error: "unknown"},
		4: {ID: 4, Error: ErrorNotHolder},
		5: {ID: 5, OK: true},
		6: {ID: 6, OK: true}, // never written: token 0
		7: {ID: 7, Error: "invalid"},
	}
	var in bytes.Buffer
	for _, c := range cmds {
		b, _ := json.Marshal(c)
		in.Write(append(b, '\n'))
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-client", "a", "-endpoints", "x", "-store", store(t)}, &in, &out, &errb,
		func(Config) (Locker, error) { return fakeLocker{}, nil }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := map[uint64]Reply{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		r.Message = ""
		got[r.ID] = r
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("reply %d: got %+v, want %+v", id, got[id], w)
		}
	}
}

// OpFly is an operation the protocol does not have.
const OpFly = "fly"

func TestWriteFenced(t *testing.T) {
	url := store(t)
	var in bytes.Buffer
	for _, c := range []Command{{ID: 1, Op: OpWrite, Key: "k", Token: 5, Value: 10}} {
		b, _ := json.Marshal(c)
		in.Write(append(b, '\n'))
	}
	// Sequential runs so that the order of the writes is fixed.
	var out bytes.Buffer
	open := func(Config) (Locker, error) { return fakeLocker{}, nil }
	run([]string{"-client", "a", "-endpoints", "x", "-store", url}, &in, &out, &out, open)
	in.Reset()
	b, _ := json.Marshal(Command{ID: 2, Op: OpWrite, Key: "k", Token: 4, Value: 11})
	in.Write(append(b, '\n'))
	run([]string{"-client", "a", "-endpoints", "x", "-store", url}, &in, &out, &out, open)
	s := out.String()
	if !strings.Contains(s, `{"id":1,"ok":true}`) || !strings.Contains(s, `"id":2,"ok":false,"error":"stale"`) {
		t.Fatalf("replies %s: want write 1 accepted, write 2 stale", s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-endpoints", "x", "-store", "http://h:1"},
		{"-client", "a", "-store", "http://h:1"},
		{"-client", "a", "-endpoints", "x"},
		{"-client", "a", "-endpoints", "x", "-store", "ftp://h"},
		{"-client", "a", "-endpoints", "x", "-store", "http://h:1", "-opt", "novalue"},
	} {
		var errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &bytes.Buffer{}, &errb, func(Config) (Locker, error) { return fakeLocker{}, nil }); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestOptFlag: -opt (the client's and simrun live's) keeps every
// key=value, the value may hold "=", and a value that is not key=value is
// an error naming it.
func TestOptFlag(t *testing.T) {
	m := OptFlag{}
	for _, v := range []string{"a=1", "b=x=y", "c="} {
		if err := m.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if want := (OptFlag{"a": "1", "b": "x=y", "c": ""}); fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	for _, v := range []string{"novalue", "=1"} {
		if err := m.Set(v); err == nil || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Errorf("Set(%q) = %v, want an error naming it", v, err)
		}
	}
}
