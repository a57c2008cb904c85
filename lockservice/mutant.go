package lockservice

import (
	"fmt"
	"slices"
	"strings"
)

// Mutant names a planted bug: values for the reference's injection points
// (variant.go), so the harness can prove it catches the bugs real lock
// services have shipped. The zero value is the reference. Every component
// of a run is built with the same Mutant's injections (Mutant.Inject*),
// which touch only the components the bug concerns.
type Mutant string

// MutantInfo describes one planted bug.
type MutantInfo struct {
	Name        Mutant
	Description string
}

// Mutants lists every planted bug, sorted by name.
func Mutants() []MutantInfo {
	out := slices.Clone(mutants)
	slices.SortFunc(out, func(a, b MutantInfo) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// ParseMutant checks a mutant name ("" is the reference).
func ParseMutant(s string) (Mutant, error) {
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
