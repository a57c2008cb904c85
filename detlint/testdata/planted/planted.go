// Package planted is a design with one planted wall-clock read, for the
// vettool test of package detlint.
package planted

import "time"

// Lease is granted until a deadline.
type Lease struct{ Until time.Time }

// Expired reads the machine's clock: the finding.
func (l Lease) Expired() bool {
	return time.Now().After(l.Until)
}
