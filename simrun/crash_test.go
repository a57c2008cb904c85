package simrun

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs"
	"github.com/fencesim/fencesim/scenarios"
	"github.com/fencesim/fencesim/sim"
)

// crashingDesign is the reference design whose clients panic as they
// start.
type crashingDesign struct{ lockservice.Design }

func (d crashingDesign) Info() lockservice.DesignInfo {
	i := d.Design.Info()
	i.Name = "crashing"
	return i
}

func (d crashingDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return crashingProtocol{}
}

// crashingProtocol panics as its client starts.
type crashingProtocol struct{}

func (crashingProtocol) Start(lockservice.ProtocolHost)       { panic("client: planted panic") }
func (crashingProtocol) Request(sim.NodeID, sim.Message)      { panic("unreachable") }
func (crashingProtocol) Receive(sim.NodeID, sim.Message) bool { panic("unreachable") }
func (crashingProtocol) Observe(lockservice.Event)            { panic("unreachable") }

var registerCrashing = sync.OnceValue(func() error {
	ref, _ := scenarios.LookupDesign(designs.DesignReplicated)
	return scenarios.RegisterDesign(crashingDesign{Design: ref})
})

// TestRunReportsACrash: a run that panics prints its verdict crash with
// where it happened, the stack, the line that reproduces it and its
// replay file (which keeps the stack too), and exits 6.
func TestRunReportsACrash(t *testing.T) {
	if err := registerCrashing(); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	spec, _ := scenarios.Lookup("kleppmann-gc-pause")
	spec.Design = "crashing"
	plan, err := scenarios.NewPlan(spec, 3)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	_, code := execute("simrun run", plan, outputFlags{}, true, &out, &errb)
	if code != exitCrash {
		t.Fatalf("exit %d, want %d; output:\n%s%s", code, exitCrash, out.String(), errb.String())
	}
	for _, want := range []string{
		"verdict=crash", "crash: panic at step 5, t=0s, in a: client: planted panic",
		"stack of the panic (seed 3):", "crash_test.go", "reproduce: ", "replay file: failures/kleppmann-gc-pause-seed3.json",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(filepath.Join("failures", "kleppmann-gc-pause-seed3.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := scenarios.ParseReplay(b)
	if err != nil || r.Verdict != "crash" || r.Crash == nil || !strings.Contains(r.Crash.Stack, "crash_test.go") {
		t.Errorf("replay file: %v, verdict %q, crash %+v", err, r.Verdict, r.Crash)
	}
	// The replay reproduces the crash: the same hash and verdict, the
	// stack never compared.
	code, rout, rerr := simrun("replay", filepath.Join("failures", "kleppmann-gc-pause-seed3.json"))
	if code != exitCrash || !strings.Contains(rout, "reproduced: trace hash") {
		t.Errorf("replay: exit %d, want %d and reproduced; output:\n%s%s", code, exitCrash, rout, rerr)
	}
	out.Reset()
	if _, code := execute("simrun run", plan, outputFlags{out: "dir"}, true, &out, &errb); code != exitCrash {
		t.Fatalf("with -out: exit %d, want %d; output:\n%s%s", code, exitCrash, out.String(), errb.String())
	}
	res, err := os.ReadFile(filepath.Join("dir", "result.json"))
	if err != nil || !strings.Contains(string(res), `"crash": "panic at step 5`) || !strings.Contains(string(res), `"stack": "goroutine`) {
		t.Errorf("result.json (%v) lacks the crash and its stack:\n%s", err, res)
	}
}
