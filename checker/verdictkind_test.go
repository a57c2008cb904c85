package checker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCrashVerdictRoundTrips: a crashed seed's verdict is spelled "crash"
// in saved results and reads back as VerdictCrash.
func TestCrashVerdictRoundTrips(t *testing.T) {
	b, err := json.Marshal(Verdict{Kind: VerdictCrash})
	require.NoError(t, err)
	var v Verdict
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	require.Equal(t, VerdictCrash, v.Kind, "%s", b)
	require.Equal(t, "crash", v.Kind.String())
}
