package scenarios

import (
	"fmt"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs"
	"github.com/fencesim/fencesim/scenario"
)

// builtinDesigns are the built-in designs by name: package scenario
// knows their shapes (lockservice/designs/shape), the simulator runs their
// processes.
var builtinDesigns = func() map[string]lockservice.Design {
	m := map[string]lockservice.Design{}
	for _, d := range designs.BuiltinDesigns() {
		m[d.Info().Name] = d
	}
	return m
}()

// RegisterDesign makes a lock design available to scenarios under its
// name (d.Info().Name, what a spec's "design" field says). Register before
// parsing or running the scenarios that name it, e.g. from an init
// function or at the start of a test; a name registered twice is an error.
// See lockservice.Design for what a design provides and must report.
func RegisterDesign(d lockservice.Design) error {
	if d == nil {
		return fmt.Errorf("scenarios: RegisterDesign(nil)")
	}
	return scenario.RegisterDesign(d)
}

// Designs describes every design scenarios can name, sorted by name.
func Designs() []lockservice.DesignInfo { return scenario.Designs() }

// LookupDesign finds a design by name: a built-in, or one registered with
// RegisterDesign. A shape registered with scenario.RegisterDesign alone
// (no processes) is no design the simulator can run.
func LookupDesign(name string) (lockservice.Design, bool) {
	if d, ok := builtinDesigns[name]; ok {
		return d, true
	}
	s, ok := scenario.LookupDesign(name)
	if !ok {
		return nil, false
	}
	d, ok := s.(lockservice.Design)
	return d, ok
}

// designOf returns the spec's design; nil if unknown or only a shape.
func designOf(s Spec) lockservice.Design {
	d, _ := LookupDesign(s.Design)
	return d
}
