package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fencesim/fencesim/scenarios"
)

// cmdMerge reads the JSON lines of several `sweep -json` runs (the shards of
// a CI matrix), checks they do not disagree, and prints one summary with the
// exit code the whole sweep would have had.
func cmdMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simrun merge FILE...   (each FILE holds `simrun sweep -json` output)")
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	type key struct {
		scenario string
		seed     uint64
	}
	seen := map[key]runJSON{}
	sums := map[string]*scenarios.Summary{}
	var order []string
	var failures []string
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "simrun merge: %v\n", err)
			return exitUsage
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for line := 1; sc.Scan(); line++ {
			var j runJSON
			if err := json.Unmarshal(sc.Bytes(), &j); err != nil || j.Scenario == "" || j.Verdict == "" {
				why := "missing scenario or verdict"
				if err != nil {
					why = err.Error()
				}
				f.Close()
				fmt.Fprintf(stderr, "simrun merge: %s:%d: not a line of `simrun sweep -json` output: %s\n", path, line, why)
				return exitUsage
			}
			k := key{j.Scenario, j.Seed}
			if prev, dup := seen[k]; dup {
				if prev.TraceHash != j.TraceHash || prev.Verdict != j.Verdict {
					fmt.Fprintf(stderr, "simrun merge: NONDETERMINISM: %s seed %d appears twice with hashes %s and %s\n", j.Scenario, j.Seed, prev.TraceHash, j.TraceHash)
					f.Close()
					return exitNondeterminism
				}
				continue // the same run in two files: count it once
			}
			seen[k] = j
			s := sums[j.Scenario]
			if s == nil {
				s = &scenarios.Summary{Scenario: j.Scenario}
				if spec, ok := scenarios.Lookup(j.Scenario); ok {
					s.Expect = spec.Expect
				}
				sums[j.Scenario] = s
				order = append(order, j.Scenario)
			}
			s.AddVerdict(j.Verdict, j.Property, j.Met, seconds(j.SimSeconds), seconds(j.WallSeconds), j.Events)
			if !j.Met {
				failures = append(failures, fmt.Sprintf("MISS %s seed %d: got %s %s, want %s — reproduce: %s", j.Scenario, j.Seed, j.Verdict, j.Property, j.Expected, j.Repro))
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			fmt.Fprintf(stderr, "simrun merge: %s: %v\n", path, err)
			return exitUsage
		}
	}
	var specs []scenarios.Spec
	for _, name := range order {
		specs = append(specs, scenarios.Spec{Name: name})
	}
	var wall time.Duration
	for _, s := range sums {
		wall += s.Wall
	}
	printSummary(stdout, specs, sums, wall, 1)
	for _, f := range failures {
		fmt.Fprintln(stdout, f)
	}
	code := exitPass
	for _, s := range sums {
		code = worse(code, s)
	}
	return code
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
