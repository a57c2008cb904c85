package scenarios

import "testing"

// FuzzSeeds runs a built-in scenario on a seed and requires its
// expectation. Plain `go test` replays every entry of
// testdata/fuzz/FuzzSeeds — the regression corpus of seeds that once
// failed — and `go test -fuzz FuzzSeeds ./scenarios` searches new seeds, writing
// any failing (scenario, seed) there for good. Unknown scenario names (the
// fuzzer mutates strings too) are skipped.
func FuzzSeeds(f *testing.F) {
	for _, s := range Builtin() {
		f.Add(s.Name, uint64(1))
	}
	f.Fuzz(func(t *testing.T, name string, seed uint64) {
		spec, ok := Lookup(name)
		if !ok {
			t.Skip("not a built-in scenario")
		}
		res, err := Run(spec, seed, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Met(spec) {
			t.Fatalf("%s seed %d: got %s %q, want %s\nreproduce: go run ./cmd/simrun run -scenario %s -seed %d",
				name, seed, res.Verdict.Kind, res.Verdict.Property(), spec.Expect, name, seed)
		}
	})
}
