package checker

import (
	"encoding/json"
	"testing"
)

// TestCrashVerdictRoundTrips: a crashed seed's verdict is spelled "crash"
// in saved results and reads back as VerdictCrash.
func TestCrashVerdictRoundTrips(t *testing.T) {
	b, err := json.Marshal(Verdict{Kind: VerdictCrash})
	if err != nil {
		t.Fatal(err)
	}
	var v Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if v.Kind != VerdictCrash || v.Kind.String() != "crash" {
		t.Errorf("%s read back as %v, want crash", b, v.Kind)
	}
}
