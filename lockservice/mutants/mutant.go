package mutants

import (
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/bugs"
)

// MutantInfo describes one planted bug (bugs.MutantInfo).
type MutantInfo = bugs.MutantInfo

// Mutants lists every planted bug, sorted by name.
func Mutants() []MutantInfo { return bugs.Mutants() }

// ParseMutant checks a mutant name ("" is the reference).
func ParseMutant(s string) (lockservice.Mutant, error) { return bugs.ParseMutant(s) }

// Design returns the design m is planted in, or "" for the reference's
// bugs (which every design built on the reference's components takes).
func Design(m lockservice.Mutant) string { return bugs.Design(m) }
