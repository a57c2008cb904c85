package scenarios

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// seedsFlag lets a user run chosen seeds from go test:
//
//	go test ./scenarios -run TestBuiltinExpectations -seeds 1..5000
var seedsFlag = flag.String("seeds", "", "seed range A..B for the scenario sweeps (default 1..200; env FENCESIM_SEEDS)")

// seedRange returns the seeds the sweeps run: -seeds or FENCESIM_SEEDS if
// given, else 1..500 for the swarm and 1..200 for scripted scenarios.
func seedRange(t *testing.T, spec Spec) (uint64, uint64) {
	s := *seedsFlag
	if s == "" {
		s = os.Getenv("FENCESIM_SEEDS")
	}
	if s == "" {
		if spec.Swarm {
			return 1, 500
		}
		return 1, 200
	}
	a, b, ok := strings.Cut(s, "..")
	lo, err1 := strconv.ParseUint(a, 10, 64)
	hi, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || hi < lo {
		t.Fatalf("bad -seeds %q: want A..B with A ≤ B", s)
	}
	return lo, hi
}

// TestBuiltinExpectations runs every built-in scenario over the seed range
// and requires its expectation on every seed: the reference passes, the
// canary fails with its property.
func TestBuiltinExpectations(t *testing.T) {
	for _, spec := range Builtin() {
		t.Run(spec.Name, func(t *testing.T) {
			t.Parallel()
			lo, hi := seedRange(t, spec)
			for seed := lo; seed <= hi; seed++ {
				res, err := Run(spec, seed, RunOptions{})
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !res.Met(spec) {
					t.Fatalf("seed %d: got %s %q, want %s\n%+v\nreproduce: go run ./cmd/simrun run -scenario %s -seed %d",
						seed, res.Verdict.Kind, res.Verdict.Property(), spec.Expect, res.Verdict, spec.Name, seed)
				}
			}
		})
	}
}

// TestDeterminism is the meta-test: every built-in scenario, 50 seeds, each
// run twice, must give identical trace hashes and event counts; and the
// readable trace of one seed must be byte-identical.
func TestDeterminism(t *testing.T) {
	for _, spec := range Builtin() {
		t.Run(spec.Name, func(t *testing.T) {
			t.Parallel()
			hashes := map[uint64]bool{}
			for seed := uint64(1); seed <= 50; seed++ {
				a, err := Run(spec, seed, RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := Run(spec, seed, RunOptions{})
				if a.TraceHash != b.TraceHash || a.Events != b.Events || a.Verdict.Kind != b.Verdict.Kind {
					t.Fatalf("seed %d: nondeterministic: hash %016x vs %016x, events %d vs %d",
						seed, a.TraceHash, b.TraceHash, a.Events, b.Events)
				}
				hashes[a.TraceHash] = true
			}
			// Seeds must matter: a hash that ignores the run would pass the
			// check above trivially.
			if len(hashes) < 40 {
				t.Fatalf("only %d distinct trace hashes over 50 seeds: the hash does not capture the run", len(hashes))
			}
			var t1, t2 strings.Builder
			Run(spec, 7, RunOptions{Trace: &t1})
			Run(spec, 7, RunOptions{Trace: &t2})
			if t1.String() != t2.String() || t1.Len() == 0 {
				t.Fatalf("seed 7: readable traces differ or are empty (%d vs %d bytes)", t1.Len(), t2.Len())
			}
		})
	}
}

// TestTracingDoesNotChangeTheRun: turning the readable trace on must not
// change what happens.
func TestTracingDoesNotChangeTheRun(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	var buf strings.Builder
	a, _ := Run(spec, 3, RunOptions{Trace: &buf})
	b, _ := Run(spec, 3, RunOptions{})
	if a.TraceHash != b.TraceHash {
		t.Fatalf("trace on: %016x, off: %016x", a.TraceHash, b.TraceHash)
	}
}

// TestKleppmannStory checks that the scenario plays out the story it
// names, not merely that it passes: A's stale write reaches the store after
// B's newer token and is rejected.
func TestKleppmannStory(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	for seed := uint64(1); seed <= 50; seed++ {
		res, err := Run(spec, seed, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var aToken, bToken uint64
		for _, g := range res.History.Grants {
			if g.Client == "a" && aToken == 0 {
				aToken = g.Token
			}
			if g.Client == "b" && bToken == 0 {
				bToken = g.Token
			}
		}
		if aToken == 0 || bToken <= aToken {
			t.Fatalf("seed %d: want a granted first and b later with a larger token, got a=%d b=%d", seed, aToken, bToken)
		}
		rejected := false
		for _, ap := range res.History.Applies {
			if ap.Client == "a" && ap.Token == aToken && !ap.Accepted {
				rejected = true
			}
			if ap.Client == "a" && ap.Accepted {
				t.Fatalf("seed %d: the store accepted a's write with token %d", seed, ap.Token)
			}
		}
		if !rejected {
			t.Fatalf("seed %d: a's stale write never reached the store", seed)
		}
	}
}

// TestCanaryFailsWithS3 is the canary: the same pause against an unfenced
// store must be caught, by the store scan (S3) and by porcupine (S8).
func TestCanaryFailsWithS3(t *testing.T) {
	spec, _ := Lookup("unfenced-gc-pause")
	res, err := Run(spec, 1, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, v := range res.Verdict.Violations {
		got[v.Property] = true
	}
	if res.Verdict.Kind != checker.VerdictViolation || !got["S3"] || !got["S8"] {
		t.Fatalf("got %+v, want a violation of S3 and S8", res.Verdict)
	}
}

// TestWorkloadsComplete guards against scenarios that pass because nothing
// happened: every client grant and at least one accepted write per client.
func TestWorkloadsComplete(t *testing.T) {
	for _, spec := range Builtin() {
		res, err := Run(spec, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range spec.Clients {
			accepted := 0
			for _, ap := range res.History.Applies {
				if ap.Client == c.Name && ap.Accepted {
					accepted++
				}
			}
			if accepted == 0 && c.Name != "a" {
				t.Errorf("%s: client %s never wrote", spec.Name, c.Name)
			}
		}
	}
}

func TestParseRejectsBadSpecs(t *testing.T) {
	good, _ := Lookup("kleppmann-gc-pause")
	base := mustJSON(t, good)
	cases := []struct {
		name, edit, want string
	}{
		{"not json", `{`, "scenario:"},
		{"unknown field", strings.Replace(base, `"design"`, `"desing":"x","design"`, 1), "unknown field"},
		{"version", strings.Replace(base, `"version":1`, `"version":9`, 1), "version 9 is not supported"},
		{"design", strings.Replace(base, `"design":"replicated"`, `"design":"paxos"`, 1), "unknown design"},
		{"expect", strings.Replace(base, `"verdict":"pass"`, `"verdict":"maybe"`, 1), "expect.verdict"},
		{"no such property", strings.Replace(base, `"verdict":"pass"`, `"verdict":"violation","property":"S99"`, 1),
			`scenario "kleppmann-gc-pause": expect.property "S99" is no property of verdict "violation"; use one of S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, L1 (or none)`},
		{"lower-case property", strings.Replace(base, `"verdict":"pass"`, `"verdict":"violation","property":"s3"`, 1), `expect.property "s3" is no property`},
		{"property of a pass", strings.Replace(base, `"verdict":"pass"`, `"verdict":"pass","property":"S3"`, 1), `expect.property "S3": a run expected to pass violates no property`},
		{"property of liveness", strings.Replace(base, `"verdict":"pass"`, `"verdict":"liveness","property":"S3"`, 1), `use one of liveness`},
		{"duration", strings.Replace(base, `"duration":"10s"`, `"duration":"ten"`, 1), "bad duration"},
		{"fault node", strings.Replace(base, `"node":"@client:a"`, `"node":"zz"`, 1), "unknown node"},
		{"fault role", strings.Replace(base, `"node":"@client:a"`, `"node":"@client:zz"`, 1), `fault 0 (pause @client:zz): @client:zz: no client is named "zz"`},
		{"fault replica", strings.Replace(base, `"node":"@client:a"`, `"node":"@replica:4"`, 1), "aim at @replica:1 to @replica:3"},
		{"fault kind", strings.Replace(base, `"kind":"pause"`, `"kind":"nap"`, 1), "unknown kind"},
		{"no clients", mustJSON(t, func() Spec { s := good; s.Clients = nil; return s }()), "needs at least one client"},
		{"zero latency", mustJSON(t, func() Spec { s := good; s.LatencyMin = 0; return s }()), "latency_min must be positive"},
		{"max below min", mustJSON(t, func() Spec { s := good; s.LatencyMax = s.LatencyMin / 2; return s }()), "latency_min ≤ latency_max"},
		{"pause duration", strings.Replace(base, `"duration":"3s"`, `"duration":"0s"`, 1), "duration must be positive"},
		{"trailing", base + "{}", "trailing data"},
		{"ttl", strings.Replace(base, `"ttl":"1s"`, `"ttl":"0s"`, 1), "ttl must be positive"},
		{"wait", strings.Replace(base, `"ttl":"1s"`, `"ttl":"1s","wait":"2m"`, 1), "wait must be in [0, 1m0s]"},
		{"limits", strings.Replace(base, `"step_limit"`, `"limits":{"reports":-1},"step_limit"`, 1), "limits.trace_bytes must be ≥ 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.edit))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := Parse([]byte(base)); err != nil {
		t.Fatalf("the unedited spec must parse: %v", err)
	}
}

// FuzzParse: no input makes Parse panic, and whatever parses also runs.
func FuzzParse(f *testing.F) {
	for _, s := range Builtin() {
		f.Add([]byte(mustJSON(f, s)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		if s.Duration > Duration(30e9) || s.StepLimit > 200_000 {
			return // valid but too long for a fuzz iteration
		}
		if _, err := Run(s, 1, RunOptions{}); err != nil {
			t.Fatalf("a parsed spec failed to run: %v", err)
		}
	})
}

func mustJSON(tb testing.TB, s Spec) string {
	tb.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func ExampleRun() {
	spec, _ := Lookup("kleppmann-gc-pause")
	res, _ := Run(spec, 1, RunOptions{})
	fmt.Println(res.Verdict.Kind, res.Met(spec))
	// Output: pass true
}
