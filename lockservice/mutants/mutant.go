package mutants

import (
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants/catalog"
)

// MutantInfo describes one planted bug (catalog.MutantInfo).
type MutantInfo = catalog.MutantInfo

// Mutants lists every planted bug, sorted by name.
func Mutants() []MutantInfo { return catalog.Mutants() }

// ParseMutant checks a mutant name ("" is the reference).
func ParseMutant(s string) (lockservice.Mutant, error) { return catalog.ParseMutant(s) }

// Design returns the design m is planted in, or "" for the reference's
// bugs (which every design built on the reference's components takes).
func Design(m lockservice.Mutant) string { return catalog.Design(m) }
