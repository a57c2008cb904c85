package nemesis

import (
	"fmt"
	"strings"
)

// Nemesis carries fault operations out in one world. The simulator's
// injector (package nemesis/inject) and the live runner (package live)
// each implement it, so one schedule means the same faults in both; this
// package, the vocabulary they share, holds no world of its own.
type Nemesis interface {
	// Apply carries op out now: a scheduled operation at its instant, or
	// a fired trigger (When cleared) at its moment. An operation whose
	// node resolves to nothing at that instant does nothing.
	Apply(op Op)
	// Cannot says why this world cannot carry out kind at all ("" if it
	// carries it out): a reason the world's own nature gives, such as a
	// TCP stream that neither duplicates nor reorders bytes.
	Cannot(k Kind) string
	// Implements reports whether the world has its own code for kind.
	Implements(k Kind) bool
}

// Uncovered returns an error naming every fault kind n neither
// implements nor declares it cannot carry out, or declares both ways;
// nil when every kind of Kinds() is accounted for. Each world's tests
// call it, so a new kind cannot be drawn into a world that silently
// ignores it.
func Uncovered(n Nemesis) error {
	var bad []string
	for _, k := range Kinds() {
		impl, why := n.Implements(k), n.Cannot(k)
		switch {
		case !impl && why == "":
			bad = append(bad, fmt.Sprintf("%s (neither implemented nor declared impossible)", k))
		case impl && why != "":
			bad = append(bad, fmt.Sprintf("%s (implemented, yet declared impossible: %s)", k, why))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("nemesis: fault kinds not accounted for: %s", strings.Join(bad, "; "))
	}
	return nil
}

// Check reports what is wrong with op alone (node names aside): a world
// carries out no operation that fails it.
func (op Op) Check() error { return op.check() }
