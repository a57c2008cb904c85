package designs

import (
	"testing"

	"github.com/fencesim/fencesim/lockservice/designs/shape"
)

// TestShapesAreTheDesigns: the shapes a plan is checked against
// (shape.Builtin) are the built-in designs' own, one for one and in order.
func TestShapesAreTheDesigns(t *testing.T) {
	designs, shapes := BuiltinDesigns(), shape.Builtin()
	if len(designs) != len(shapes) {
		t.Fatalf("%d designs, %d shapes", len(designs), len(shapes))
	}
	for i, d := range designs {
		if d.Info() != shapes[i].Info() {
			t.Errorf("design %d: info %+v, shape %+v", i, d.Info(), shapes[i].Info())
		}
		for _, n := range []int{0, 1, 3, 5} {
			dn, derr := d.Nodes(n)
			sn, serr := shapes[i].Nodes(n)
			if (derr == nil) != (serr == nil) || len(dn) != len(sn) {
				t.Errorf("%s: Nodes(%d) = %v, %v; shape's %v, %v", d.Info().Name, n, dn, derr, sn, serr)
			}
		}
	}
}
