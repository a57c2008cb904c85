package scenario

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/fencesim/fencesim/nemesis"
)

// ReplayFormat is the replay-file format this build reads and writes.
// Format 2 added the digest; a format-1 file is refused with the command
// that writes a fresh one, since nothing shows whether it was edited.
const ReplayFormat = 2

// ProgramVersion names the behaviour of this build's simulations. Bump it
// with any change that alters a run's trace for a given plan (the service,
// the clients, the simulator, the fault kinds): a replay file written by
// another version may legitimately run differently, and replay says so
// instead of reporting nondeterminism.
const ProgramVersion = "fencesim-0.20" // 0.20: half of the swarm's seeds draw asynchronous storage writes for the reference's replicas (Spec.AsyncWrites, drawAsyncWrites, from a stream of its own): each Ready's sync runs while the replica goes on, its votes and acknowledgements wait for it, and it applies only entries its own disk holds durably; on a slow disk those seeds run differently (10 of swarm seeds 1..30); and a replica that led and stepped down within one batch of events drops the requests it proposed meanwhile (swarm seed 61228), so a run that meets that runs differently; 0.19: a reference leader sends its appends before it syncs them (its sync overlaps its followers'; it counts itself towards a quorum only once synced), so runs with slow disks — most swarm seeds, through their story strikes — run differently; 0.18: every swarm seed draws three story strikes on top of its schedule (nemesis.StoryStrikes: the store crashed under a holder paused past its lease, a forward wall jump on the leader as it grants, a replica crashed on a slow disk right after it voted with the winner cut off, a holder paused just past its lease), from a stream of its own, so every swarm seed runs differently; 0.17: half of the swarm's seeds draw long think times (1..4 TTLs) for some or all of their clients (ClientSpec.ThinkTime, DrawThinkTimes), so those seeds run differently; the simulator's clients send a release shed as overloaded again, as the HTTP client does, so runs that shed a release run differently; the reference's table keeps the keys of granted attempts in a window of their own beside the busy ones, so a run whose poller outlives the old shared window runs differently; and grants name their attempt, judged by S11; 0.16: holders come first at a replica's ingress bound — a renewal or release is shed only at twice the bound, an acquire at the bound (Replica.shed) — so runs whose replicas reach their bound with holders' requests in flight run differently, and the swarm draws group-commit windows in front of a drawn ingress bound again (3 of 0.15's swarm seeds failed liveness there), so those seeds run differently; and lockd's queue scripts drop a head whose request was answered already instead of answering held with the lock free, so lockd runs that meet one run differently, and a simulated lockd waiter whose call to Redis times out leaves the line, as lockd does; and the default bound on reports grows with a spec's clients and seconds (1,000 per client-second, at least 500,000), so a large spec's run that was cut at 500,000 runs on; 0.15: the reference leader hands a contended lock over in one log entry — a release with waiters parked carries the head waiter's acquire, granted by that entry if its own end took effect (waitqueue.go) — so every run whose clients wait (the standard and swarm runs) runs differently; and a quarter of the swarm's seeds draw one or two strikes at Raft's moments on top of their schedule (nemesis.RaftStrikes: minority-tail, stale-append), a quarter slow disks for the whole run (Spec.ServerSyncDelay, StoreSyncDelay), and half of those that commit in groups a group-commit window (Spec.GroupCommitWindow), each from a stream of its own, so those seeds run differently; and lockd's simulated instances now wait in lockd's fair queue — the queue scripts on the simulated Redis (sorted sets, TIME, PUBLISH to subscribed instances), fenced by the namespace's epoch, a release handing the lock to the head waiter — so every lockd run runs differently; 0.14: a torn crash no longer tears a write made while a slow Sync of the same event is still in flight (the write waits for that sync, as the node's messages do, so a crash stopping the sync drops it whole), and a replica syncs the cut of a conflicting log suffix before writing the entries that replace it (swarm seed 69767: S10) — 17 of the 4,200 runs of the 200-seed gate run differently, all swarm; 0.13: a restart cuts a torn Raft log tail or sim-Redis AOF tail with Disk.Truncate, which never tears, instead of rewriting the kept prefix (the guided-search finding: a torn crash during the rewrite's sync lost synced entries), so a run with a torn crash during that cut runs differently; and BUGGIFY (issue 24): a third of the swarm's seeds draw small Raft append and in-flight caps and tight election timings (Spec.Buggify), and half of those with aimed faults draw the crash-recovering aim, so those seeds' runs differ; 0.12: the reference's clients go through the node's front end (lockservice/frontend, issue 20) with request ids as keys, renewal TTLs and release ids; 0.11: every run draws snapshot thresholds (issue 23), half of the swarm's seeds draw group commit and lockd runs in the simulator (issue 20)

// Replay is a replay file: everything a run was made of — the program
// version, the seed, the full scenario spec, every drawn option and the
// explicit fault schedule — and what it produced, so that `simrun replay`
// can run it again and compare.
type Replay struct {
	Format   int              `json:"format"`
	Program  string           `json:"program"`
	Seed     uint64           `json:"seed"`
	Spec     Spec             `json:"spec"`
	Options  *nemesis.Options `json:"options,omitempty"`
	Schedule nemesis.Schedule `json:"schedule"`
	// What the recorded run produced.
	Verdict   string `json:"verdict"`
	Property  string `json:"property,omitempty"`
	TraceHash string `json:"trace_hash"`
	Events    uint64 `json:"events"`
	// Digest holds, for every other field but the format, the SHA-256 of
	// its canonical JSON (Marshal writes it, ParseReplay checks it), so
	// that a file edited by hand — a schedule trimmed, a seed or a
	// recorded hash changed — is refused as modified, naming the field,
	// instead of running and being reported as nondeterminism. It detects
	// edits, not forgery: anyone can recompute it.
	Digest map[string]string `json:"digest"`
	// Crash is the panic of a run whose verdict was crash, its stack
	// included: shown to the reader, never compared (the stack depends on
	// the build and the machine).
	Crash *Crash `json:"crash,omitempty"`
}

// Plan returns the plan the replay runs: its schedule as written, never
// drawn again.
func (r Replay) Plan() Plan {
	return Plan{Spec: r.Spec, Seed: r.Seed, Options: r.Options, Schedule: r.Schedule}
}

// Marshal writes the replay as indented JSON, with the digest of what it
// holds now.
func (r Replay) Marshal() []byte {
	r.Format, r.Digest = ReplayFormat, nil
	fields, err := topLevel(mustMarshal(r))
	if err == nil {
		r.Digest, err = fieldDigests(fields)
	}
	if err != nil {
		panic(fmt.Sprintf("scenarios: digesting a replay: %v", err)) // its own encoding: cannot happen
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("scenarios: encoding a replay: %v", err)) // only plain data: cannot happen
	}
	return append(b, '\n')
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scenarios: encoding a replay: %v", err)) // only plain data: cannot happen
	}
	return b
}

// topLevel splits a JSON object into its fields, as written.
func topLevel(b []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	err := json.Unmarshal(b, &fields)
	return fields, err
}

// fieldDigests returns the digest of every field but the format and the
// digest itself: SHA-256 over the field's name, a zero byte and its value
// in canonical JSON. Canonical means decoded and encoded again with
// numbers kept as written, object keys sorted and no spaces, so that
// reformatting a file or reordering its keys changes no digest, while any
// change of a value does — and it depends on JSON alone, not on this
// build's types, so a file of another program version is judged as it was
// written.
func fieldDigests(fields map[string]json.RawMessage) (map[string]string, error) {
	d := map[string]string{}
	for name, raw := range fields { //detlint:sorted each entry on its own: order cannot matter
		if name == "format" || name == "digest" {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("field %q: %v", name, err)
		}
		c, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %v", name, err)
		}
		sum := sha256.Sum256(append([]byte(name+"\x00"), c...))
		d[name] = hex.EncodeToString(sum[:])
	}
	return d, nil
}

// checkDigest compares the digests of a file's fields with those it
// carries and names the first field, in name order, that differs.
func checkDigest(b []byte, carried map[string]string) error {
	fields, err := topLevel(b)
	if err != nil {
		return err
	}
	got, err := fieldDigests(fields)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(got))
	for _, name := range slices.Sorted(maps.Keys(carried)) {
		if _, ok := got[name]; !ok {
			return fmt.Errorf("the field %q was removed", name)
		}
	}
	for _, name := range names {
		want, ok := carried[name]
		switch {
		case !ok:
			return fmt.Errorf("the field %q was added", name)
		case want != got[name]:
			return fmt.Errorf("the field %q (or its digest) was edited", name)
		}
	}
	return nil
}

// Rerun is the command that runs r's seed afresh (and writes a fresh
// replay file). A built-in is run by name; a spec of the user's own by
// the file it came from, which the replay file does not know.
func (r Replay) Rerun() string {
	what, note := "-scenario "+r.Spec.Name, ""
	if _, ok := Lookup(r.Spec.Name); !ok {
		what, note = "-spec FILE.json", fmt.Sprintf(", FILE.json being the spec of scenario %q (it is not a built-in)", r.Spec.Name)
	}
	c := fmt.Sprintf("simrun run %s -seed %d", what, r.Seed)
	if r.Spec.Mutant != "" {
		c += " -mutant " + r.Spec.Mutant
	}
	return c + note
}

// ParseReplay reads a replay file strictly: unknown fields, trailing data,
// another format, a field that does not match its digest (an edited file),
// an invalid spec or a schedule naming unknown nodes are errors that say
// what is wrong. It never panics. A different program
// version is not an error here: the caller decides (see ProgramVersion).
func ParseReplay(b []byte) (Replay, error) {
	var r Replay
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Replay{}, fmt.Errorf("replay file: %v", err)
	}
	if dec.More() {
		return Replay{}, fmt.Errorf("replay file: trailing data after the JSON object")
	}
	if r.Format == 1 {
		return Replay{}, fmt.Errorf("replay file: format 1 carries no digest, so an edit cannot be told from nondeterminism; "+
			"this build reads format %d only. Write a fresh file: %s", ReplayFormat, r.Rerun())
	}
	if r.Format != ReplayFormat {
		return Replay{}, fmt.Errorf("replay file: format %d is not supported (this build reads format %d)", r.Format, ReplayFormat)
	}
	if r.Program == "" || r.TraceHash == "" || r.Verdict == "" || r.Digest == nil {
		return Replay{}, fmt.Errorf("replay file: program, verdict, trace_hash and digest are required")
	}
	if err := checkDigest(b, r.Digest); err != nil {
		return Replay{}, fmt.Errorf("replay file: modified after it was written: %v. "+
			"A replay file runs as written; write a fresh one with: %s", err, r.Rerun())
	}
	if err := r.Schedule.Check(); err != nil {
		return Replay{}, fmt.Errorf("replay file: %w", err)
	}
	if r.Options != nil {
		if err := r.Options.Validate(); err != nil {
			return Replay{}, fmt.Errorf("replay file: %w", err)
		}
	}
	if err := r.Plan().Validate(); err != nil {
		return Replay{}, fmt.Errorf("replay file: %w", err)
	}
	return r, nil
}
