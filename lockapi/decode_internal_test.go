package lockapi

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// FuzzDecodeBody: a hostile body never panics the decoder, every refusal
// names a field, and what the one-pass decoder (JSON v2, strict) accepts,
// encoding/json (v1, with unknown fields refused) accepts too, to the same
// request: the switch to v2 made the API stricter, never looser.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"client":"a","ttl_ms":1000,"request_id":"q","wait_ms":5}`,
		`{"client":"a","token":"42","ttl_ms":1000}`,
		`{"client":"a","client":"b"}`, `{"Client":"a"}`, `{"tll_ms":5}`, `[1]`, `null`, ``,
		`{"client":"a"} {}`, `{"token":42}`, `{"token":"-1"}`, `{"ttl_ms":1e400}`, `{"client":"\u00e9\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(v2, v1 any) {
			e := decode(body, v2)
			if e != nil {
				if e.status != 400 || e.body.Field == "" {
					t.Fatalf("%q: refusal %d naming no field: %+v", body, e.status, e.body)
				}
				return
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v1); err != nil {
				t.Fatalf("%q: accepted as %+v, but encoding/json refuses it: %v", body, v2, err)
			}
			if _, err := dec.Token(); err != io.EOF {
				t.Fatalf("%q: accepted, but encoding/json finds more after it", body)
			}
			a, _ := json.Marshal(v2)
			b, _ := json.Marshal(v1)
			if !bytes.Equal(a, b) {
				t.Fatalf("%q: decoded as %s, encoding/json as %s", body, a, b)
			}
		}
		check(&AcquireRequest{}, &AcquireRequest{})
		check(&RenewRequest{}, &RenewRequest{})
		check(&ReleaseRequest{}, &ReleaseRequest{})
	})
}

// BenchmarkDecodeAcquire: one acquire body, as every acquire pays it.
//
//	go test -run '^$' -bench DecodeAcquire -benchmem ./lockapi
func BenchmarkDecodeAcquire(b *testing.B) {
	body := []byte(`{"client":"bench-w12","ttl_ms":10000,"request_id":"0a1b2c3d-1f-1","wait_ms":5000}`)
	b.ReportAllocs()
	for b.Loop() {
		var req AcquireRequest
		if e := decode(body, &req); e != nil {
			b.Fatal(e.body.Message)
		}
	}
}
