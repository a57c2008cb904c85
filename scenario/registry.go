package scenario

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs/shape"
)

// registry holds the shape of every design a spec can name: the built-ins
// (lockservice/designs/shape) and those registered by RegisterDesign.
var registry = struct {
	sync.RWMutex
	byName map[string]lockservice.DesignShape
}{byName: map[string]lockservice.DesignShape{}}

func init() {
	for _, d := range shape.Builtin() {
		if err := RegisterDesign(d); err != nil {
			panic(err)
		}
	}
}

// RegisterDesign makes a design's shape available to specs under its
// name (d.Info().Name, what a spec's "design" field says). Register before
// parsing the specs that name it; a name registered twice is an error.
// scenarios.RegisterDesign registers a whole design (its processes too),
// for the simulator to run.
func RegisterDesign(d lockservice.DesignShape) error {
	if d == nil {
		return fmt.Errorf("scenarios: RegisterDesign(nil)")
	}
	name := d.Info().Name
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		return fmt.Errorf("scenarios: design name %q must be a non-empty kebab-case word", name)
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byName[name]; dup {
		return fmt.Errorf("scenarios: design %q is already registered", name)
	}
	registry.byName[name] = d
	return nil
}

// Designs describes every design a spec can name, sorted by name.
func Designs() []lockservice.DesignInfo {
	registry.RLock()
	defer registry.RUnlock()
	var out []lockservice.DesignInfo
	for _, d := range registry.byName { //detlint:sorted sorted below
		out = append(out, d.Info())
	}
	slices.SortFunc(out, func(a, b lockservice.DesignInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// designNames lists the designs' names, sorted.
func designNames() []string {
	var names []string
	for _, d := range Designs() {
		names = append(names, d.Name)
	}
	return names
}

// LookupDesign finds a design's shape by name: what was registered under
// it (for scenarios.RegisterDesign, the whole design).
func LookupDesign(name string) (lockservice.DesignShape, bool) {
	registry.RLock()
	defer registry.RUnlock()
	d, ok := registry.byName[name]
	return d, ok
}
