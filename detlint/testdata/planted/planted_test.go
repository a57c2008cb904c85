package planted

import (
	"testing"
	"time"
)

// Tests run outside the loop: this time.Now is not a finding.
func TestExpired(t *testing.T) {
	if (Lease{Until: time.Now().Add(time.Hour)}).Expired() {
		t.Fatal("expired early")
	}
}
