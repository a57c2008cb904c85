package mutants

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencesim/fencesim/lockservice"
)

// MutantInfo describes one planted bug.
type MutantInfo struct {
	Name        lockservice.Mutant
	Description string
}

// Mutants lists every planted bug, sorted by name.
func Mutants() []MutantInfo {
	out := slices.Clone(mutants)
	slices.SortFunc(out, func(a, b MutantInfo) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// ParseMutant checks a mutant name ("" is the reference).
func ParseMutant(s string) (lockservice.Mutant, error) {
	if s == "" {
		return "", nil
	}
	for _, m := range mutants {
		if string(m.Name) == s {
			return m.Name, nil
		}
	}
	var names []string
	for _, m := range Mutants() {
		names = append(names, string(m.Name))
	}
	return "", fmt.Errorf("lockservice: unknown mutant %q (known: %s)", s, strings.Join(names, ", "))
}
