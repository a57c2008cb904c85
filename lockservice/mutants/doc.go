// Package mutants plants the bugs of the catalogue (lockservice/bugs):
// each Mutant is nothing but values for the reference's injection points
// (reference/variant.go), put in a component's config by Inject*, so the
// harness can prove it catches the bugs real lock services have shipped.
package mutants
