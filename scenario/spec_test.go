package scenario

import (
	"strings"
	"testing"

	"github.com/fencesim/fencesim/lockservice"
)

// TestValidateBoundsBuggifyTicks: election and heartbeat ticks far past
// any timing worth testing are refused with an error that names the
// field. Unbounded, election_ticks 2^62 overflowed Raft's randomized
// timeout and the tick timer: the run spun at t=0 until its step limit
// and ended "unknown", an odd spec reported as an unjudged run.
func TestValidateBoundsBuggifyTicks(t *testing.T) {
	for _, tc := range []struct {
		b    lockservice.Buggify
		want string // "" : valid
	}{
		{lockservice.Buggify{ElectionTicks: 5, HeartbeatTicks: 2}, ""},
		{lockservice.Buggify{ElectionTicks: MaxBuggifyTicks, HeartbeatTicks: MaxBuggifyTicks - 1}, ""},
		{lockservice.Buggify{ElectionTicks: 1 << 62, HeartbeatTicks: 1}, "election_ticks"},
		{lockservice.Buggify{ElectionTicks: MaxBuggifyTicks + 1, HeartbeatTicks: 2}, "election_ticks"},
		{lockservice.Buggify{ElectionTicks: 3, HeartbeatTicks: 2, AppendEntries: 65}, "append_entries"},
		{lockservice.Buggify{ElectionTicks: 2, HeartbeatTicks: 2}, "election_ticks > heartbeat_ticks"},
	} {
		s := StandardSpec()
		b := tc.b
		s.Buggify = &b
		err := s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.b, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error naming %s", tc.b, err, tc.want)
		}
	}
}
