// Package detlint enforces fencesim's determinism contract by reading the
// syntax of Go files: the simulator's own packages, and a user's design that
// is to run inside the simulator.
//
// # The contract
//
// fencesim is a deterministic simulator: the same seed must produce the same
// run, event for event, so that every failure it finds can be replayed. The
// simulation packages (sim, fakeclock, lockservice and all its subpackages,
// nemesis, and process, the contract their processes are written against)
// therefore run on a single thread, read time only from virtual clocks and
// draw randomness only from explicitly seeded sources. Inside them the
// following are forbidden, because each lets something other than the seed
// decide what happens:
//
//   - go statements: the Go runtime, not the simulator, schedules goroutines.
//   - channels (chan types, make(chan …), sends, receives including a range
//     over a channel, select): their readiness depends on goroutine
//     scheduling, and select picks among ready cases at random. One
//     exception: a chan type may appear in the signature of a method, because
//     an interface defined elsewhere can dictate it (fakeclock.Clock
//     implements clockwork.Clock, whose After returns <-chan time.Time; the
//     method panics instead of making a channel). Such a method still cannot
//     make, send on, receive from or select on a channel without a finding.
//   - packages sync and sync/atomic: they exist only for real concurrency,
//     which the simulator does not have.
//   - time.Now, time.Since, time.Until, time.Sleep, time.After,
//     time.AfterFunc, time.Tick, time.NewTimer, time.NewTicker: they read or
//     wait on the machine's clock. Use the node's clock (Env.Clock()). Pure
//     values and arithmetic (time.Duration, time.Millisecond, …) are fine.
//   - the global functions of math/rand and math/rand/v2 (rand.IntN,
//     rand.Shuffle, rand.Float64, …): their source is seeded randomly per
//     process. Only the constructors of explicit sources (rand.New,
//     rand.NewPCG, rand.NewChaCha8, rand.NewSource, rand.NewZipf) and type
//     names (rand.Rand, rand.Source, rand.PCG, …) may be used; methods on a
//     seeded *rand.Rand are fine.
//   - crypto/rand: operating-system entropy cannot be reproduced by a seed.
//   - ranging over a map: Go randomizes map iteration order on every run.
//     detlint flags a range over a map literal, over make(map…), over
//     maps.Keys/Values/All, and — best effort, from declarations in the same
//     file — over a variable, parameter, struct field or index expression
//     whose declared type is a map.
//   - dot imports of the packages above, which would hide their uses.
//
// # Escape hatch
//
// A range over a map that is provably insensitive to iteration order (for
// example, it only collects the keys, which are sorted afterwards, or it only
// sums values) may be marked with the directive comment
//
//	//detlint:sorted
//
// either on the line of the for statement or on the line directly above it.
// Text may follow the directive after a space, to say why the loop is safe:
//
//	//detlint:sorted keys are sorted below
//	for id := range s.nodes {
//		ids = append(ids, id)
//	}
//	slices.Sort(ids)
//
// The directive suppresses only map-range findings; nothing else can be
// suppressed.
//
// # How it works
//
// The check is purely syntactic (go/parser and go/ast), so it works while
// other packages do not type-check. Identifiers are matched to imports by
// their local name, honouring renamed imports, and the parser's object
// resolution is used to skip local variables that shadow a package name.
// Files must therefore be parsed without parser.SkipObjectResolution.
// Map types declared in other files of a package are not seen.
//
// # Using it on your own design
//
// A design that runs inside the simulator is bound by the same contract.
// There are three ways to check it, all running the same checks:
//
//   - in the design's own test, [Check] (t, patterns...) fails the test on
//     any finding; [Lint] returns the findings to inspect;
//   - as a vet tool: go install github.com/fencesim/fencesim/cmd/detlint,
//     then go vet -vettool=$(which detlint) ./mydesign/...;
//   - standalone: detlint ./mydesign/... ([Analyzer] under singlechecker).
//
// Test files (_test.go) are never judged: tests drive the design from
// outside the loop.
//
// fencesim's own gate, internal/detlint, lints the simulation packages and
// the in-loop files of scenarios with [Lint], and keeps the layers apart.
package detlint

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"
)

// Rule names, one per kind of finding.
const (
	RuleGoStmt     = "go-statement"
	RuleChanType   = "chan-type"
	RuleMakeChan   = "make-chan"
	RuleChanSend   = "chan-send"
	RuleChanRecv   = "chan-receive"
	RuleSelect     = "select"
	RuleSync       = "sync"
	RuleWallClock  = "wall-clock"
	RuleGlobalRand = "global-rand"
	RuleCryptoRand = "crypto-rand"
	RuleMapRange   = "map-range"
	RuleDotImport  = "dot-import"
)

// SortedDirective marks a map range as order-insensitive.
const SortedDirective = "//detlint:sorted"

// Finding is one violation of the determinism contract.
type Finding struct {
	pos     token.Pos // for the analyzer's diagnostics
	Pos     token.Position
	Rule    string
	Message string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s [%s]", f.Pos, f.Message, f.Rule)
}

// Why each construct is forbidden.
const (
	whyGoroutine = "goroutines are scheduled by the Go runtime, not by the simulator, so interleavings differ between runs; " +
		"run work as simulator events (timers on the node's fakeclock.Clock, messages via Env.Send)"
	whyChannel = "channels synchronize goroutines and their readiness depends on runtime scheduling; " +
		"the simulator is single-threaded, so deliver messages through Env.Send"
	whySelect = "when several cases are ready the runtime picks one at random, and readiness depends on goroutine scheduling; " +
		"the simulator is single-threaded, so deliver messages through Env.Send"
	whySync = "locks and atomics exist only for real concurrency, which the single-threaded simulator does not have; " +
		"their presence means something runs outside the simulator's schedule"
	whyWallClock = "it reads or waits on the machine's clock, which differs between runs; " +
		"use the node's virtual fakeclock.Clock (Env.Clock()) instead"
	whyGlobalRand = "it draws from the global source, which is seeded randomly for every process; " +
		"draw from an explicitly seeded *rand.Rand (Env.Rand()) instead"
	whyCryptoRand = "it reads operating-system entropy that no seed can reproduce; " +
		"use the seeded *rand.Rand from Env.Rand()"
	whyMapRange = "Go randomizes map iteration order on every run; iterate over sorted keys instead, " +
		"or, if the loop is proven order-insensitive, mark it with " + SortedDirective + " on its line or the line above"
	whyDotImport = "a dot import hides the package's identifiers from detlint; import it by name"
)

// wallClock lists the functions of package time that read or wait on the
// machine's clock.
var wallClock = map[string]bool{
	"Now":       true,
	"Since":     true,
	"Until":     true,
	"Sleep":     true,
	"After":     true,
	"AfterFunc": true,
	"Tick":      true,
	"NewTimer":  true,
	"NewTicker": true,
}

// randAllowed lists the identifiers of math/rand and math/rand/v2 that do not
// touch the global source: constructors of explicit sources and type names.
var randAllowed = map[string]bool{
	// constructors
	"New":        true,
	"NewPCG":     true,
	"NewChaCha8": true,
	"NewSource":  true,
	"NewZipf":    true,
	// types
	"Rand":     true,
	"Source":   true,
	"Source64": true,
	"PCG":      true,
	"ChaCha8":  true,
	"Zipf":     true,
}

// mapIterators lists the functions of package maps whose iterators yield in
// map order.
var mapIterators = map[string]bool{
	"Keys":   true,
	"Values": true,
	"All":    true,
}

// watched lists the import paths whose identifiers detlint inspects; a dot
// import of any of them is forbidden.
var watched = map[string]bool{
	"time":         true,
	"sync":         true,
	"sync/atomic":  true,
	"math/rand":    true,
	"math/rand/v2": true,
	"maps":         true,
}

// maxDepth bounds the best-effort type resolution, which follows
// declarations that may refer to each other.
const maxDepth = 32

type linter struct {
	fset     *token.FileSet
	imports  map[string]string // local name -> import path
	sorted   map[int]bool      // lines carrying SortedDirective
	skip     map[ast.Node]bool // nodes already covered by another finding
	findings []Finding
}

// LintFile reports every construct in f that breaks the determinism
// contract, in source order. It does not modify f. f must have been parsed
// with comments (for the //detlint:sorted directive) and with object
// resolution (the default), which is used to tell package names from local
// variables that shadow them.
func LintFile(fset *token.FileSet, f *ast.File) []Finding {
	l := &linter{
		fset:    fset,
		imports: make(map[string]string),
		sorted:  make(map[int]bool),
		skip:    make(map[ast.Node]bool),
	}
	l.collectImports(f)
	l.collectDirectives(f)
	for _, decl := range f.Decls {
		ast.Inspect(decl, l.visit)
	}
	slices.SortStableFunc(l.findings, func(a, b Finding) int {
		if a.Pos.Offset != b.Pos.Offset {
			return a.Pos.Offset - b.Pos.Offset
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return l.findings
}

func (l *linter) report(pos token.Pos, rule, format string, args ...any) {
	l.findings = append(l.findings, Finding{
		pos:     pos,
		Pos:     l.fset.Position(pos),
		Rule:    rule,
		Message: fmt.Sprintf(format, args...),
	})
}

// defaultName is the name an import of path binds when it is not renamed:
// the last path element, skipping a major-version suffix such as /v2.
func defaultName(path string) string {
	elems := strings.Split(path, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && isVersion(name) {
		name = elems[len(elems)-2]
	}
	return name
}

func isVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (l *linter) collectImports(f *ast.File) {
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		if path == "crypto/rand" {
			l.report(spec.Pos(), RuleCryptoRand, "import of %q: %s", path, whyCryptoRand)
			continue
		}
		name := defaultName(path)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		switch name {
		case "_":
			continue
		case ".":
			if watched[path] {
				l.report(spec.Pos(), RuleDotImport, "dot import of %q: %s", path, whyDotImport)
			}
			continue
		}
		l.imports[name] = path
	}
}

func (l *linter) collectDirectives(f *ast.File) {
	for _, group := range f.Comments {
		for _, c := range group.List {
			rest, ok := strings.CutPrefix(c.Text, SortedDirective)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
				continue
			}
			l.sorted[l.fset.Position(c.Slash).Line] = true
		}
	}
}

// pkgRef reports the import path that e refers to, if e is an identifier
// naming an import (and not a local declaration shadowing it).
func (l *linter) pkgRef(e ast.Expr) (string, bool) {
	id, ok := e.(*ast.Ident)
	if !ok || id.Obj != nil {
		return "", false
	}
	path, ok := l.imports[id.Name]
	return path, ok
}

// qualified renders sel as written, adding the import path when the import
// was renamed.
func (l *linter) qualified(sel *ast.SelectorExpr, path string) string {
	s := types.ExprString(sel)
	if id := sel.X.(*ast.Ident); id.Name != defaultName(path) {
		s += fmt.Sprintf(" (import %q)", path)
	}
	return s
}

// isBuiltin reports whether e is the unshadowed predeclared identifier name.
func isBuiltin(e ast.Expr, name string) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == name && id.Obj == nil
}

func (l *linter) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.FuncDecl:
		// Method signatures may be dictated by interfaces defined elsewhere,
		// so chan types in them are allowed; everything that makes or uses
		// a channel is still reported.
		if n.Recv != nil {
			for _, list := range []*ast.FieldList{n.Type.Params, n.Type.Results} {
				if list != nil {
					l.skipChanTypes(list)
				}
			}
		}

	case *ast.GoStmt:
		l.report(n.Go, RuleGoStmt, "go statement: %s", whyGoroutine)

	case *ast.ChanType:
		if !l.skip[n] {
			l.report(n.Begin, RuleChanType, "channel type %s: %s", types.ExprString(n), whyChannel)
		}
		// A channel type is one construct, however deeply nested.
		l.skipChanTypes(n.Value)

	case *ast.CallExpr:
		if isBuiltin(n.Fun, "make") && len(n.Args) > 0 {
			if c, ok := ast.Unparen(n.Args[0]).(*ast.ChanType); ok {
				l.report(n.Pos(), RuleMakeChan, "make(%s): %s", types.ExprString(c), whyChannel)
				l.skip[c] = true
			}
		}

	case *ast.SendStmt:
		if !l.skip[n] {
			l.report(n.Arrow, RuleChanSend, "channel send %s <- …: %s", types.ExprString(n.Chan), whyChannel)
		}

	case *ast.UnaryExpr:
		if n.Op == token.ARROW && !l.skip[n] {
			l.report(n.OpPos, RuleChanRecv, "channel receive <-%s: %s", types.ExprString(n.X), whyChannel)
		}

	case *ast.SelectStmt:
		l.report(n.Select, RuleSelect, "select statement: %s", whySelect)
		// The communications of the cases are part of the select.
		for _, s := range n.Body.List {
			if cc, ok := s.(*ast.CommClause); ok {
				l.skipComm(cc.Comm)
			}
		}

	case *ast.SelectorExpr:
		l.checkSelector(n)

	case *ast.RangeStmt:
		l.checkRange(n)
	}
	return true
}

func (l *linter) skipChanTypes(n ast.Node) {
	ast.Inspect(n, func(m ast.Node) bool {
		if c, ok := m.(*ast.ChanType); ok {
			l.skip[c] = true
		}
		return true
	})
}

func (l *linter) skipComm(s ast.Stmt) {
	recv := func(e ast.Expr) {
		if u, ok := ast.Unparen(e).(*ast.UnaryExpr); ok && u.Op == token.ARROW {
			l.skip[u] = true
		}
	}
	switch s := s.(type) {
	case *ast.SendStmt:
		l.skip[s] = true
	case *ast.ExprStmt:
		recv(s.X)
	case *ast.AssignStmt:
		if len(s.Rhs) == 1 {
			recv(s.Rhs[0])
		}
	}
}

func (l *linter) checkSelector(sel *ast.SelectorExpr) {
	path, ok := l.pkgRef(sel.X)
	if !ok {
		return
	}
	name := sel.Sel.Name
	switch path {
	case "sync", "sync/atomic":
		l.report(sel.Pos(), RuleSync, "%s: package %q is forbidden: %s", l.qualified(sel, path), path, whySync)
	case "time":
		if wallClock[name] {
			l.report(sel.Pos(), RuleWallClock, "%s: %s", l.qualified(sel, path), whyWallClock)
		}
	case "math/rand", "math/rand/v2":
		if !randAllowed[name] {
			l.report(sel.Pos(), RuleGlobalRand, "%s: %s", l.qualified(sel, path), whyGlobalRand)
		}
	}
}

func (l *linter) checkRange(rs *ast.RangeStmt) {
	if rs.X == nil {
		return
	}
	if _, ok := l.underlying(l.typeOf(rs.X, 0), 0).(*ast.ChanType); ok {
		l.report(rs.For, RuleChanRecv, "range over channel %s receives from it: %s", types.ExprString(rs.X), whyChannel)
		return
	}
	if !l.rangesOverMap(rs.X) {
		return
	}
	line := l.fset.Position(rs.For).Line
	if l.sorted[line] || l.sorted[line-1] {
		return
	}
	l.report(rs.For, RuleMapRange, "range over map %s: %s", types.ExprString(rs.X), whyMapRange)
}

// rangesOverMap reports whether the syntax shows x to be a map, or an
// iterator in map order.
func (l *linter) rangesOverMap(x ast.Expr) bool {
	if call, ok := ast.Unparen(x).(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if path, ok := l.pkgRef(sel.X); ok && path == "maps" && mapIterators[sel.Sel.Name] {
				return true
			}
		}
	}
	return l.isMap(l.typeOf(x, 0), 0)
}

// typeOf returns the syntax of e's type as far as declarations in the same
// file show it, or nil.
func (l *linter) typeOf(e ast.Expr, depth int) ast.Expr {
	if e == nil || depth > maxDepth {
		return nil
	}
	depth++
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return l.identType(e, depth)
	case *ast.CompositeLit:
		return e.Type
	case *ast.TypeAssertExpr:
		return e.Type
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			if t := l.typeOf(e.X, depth); t != nil {
				return &ast.StarExpr{X: t}
			}
		}
	case *ast.StarExpr:
		if p, ok := l.underlying(l.typeOf(e.X, depth), depth).(*ast.StarExpr); ok {
			return p.X
		}
	case *ast.SelectorExpr:
		return l.fieldType(l.typeOf(e.X, depth), e.Sel.Name, depth)
	case *ast.IndexExpr:
		switch t := l.underlying(l.typeOf(e.X, depth), depth).(type) {
		case *ast.MapType:
			return t.Value
		case *ast.ArrayType:
			return t.Elt
		}
	case *ast.CallExpr:
		return l.callType(e, depth)
	}
	return nil
}

func (l *linter) callType(call *ast.CallExpr, depth int) ast.Expr {
	switch {
	case isBuiltin(call.Fun, "make") && len(call.Args) > 0:
		return call.Args[0]
	case isBuiltin(call.Fun, "new") && len(call.Args) > 0:
		return &ast.StarExpr{X: call.Args[0]}
	}
	fun := ast.Unparen(call.Fun)
	switch fun.(type) {
	case *ast.MapType, *ast.ArrayType:
		return fun // conversion
	}
	id, ok := fun.(*ast.Ident)
	if !ok || id.Obj == nil {
		return nil
	}
	switch d := id.Obj.Decl.(type) {
	case *ast.TypeSpec:
		return id // conversion to a named type
	case *ast.FuncDecl:
		if r := d.Type.Results; r != nil && len(r.List) == 1 && len(r.List[0].Names) <= 1 {
			return r.List[0].Type
		}
	case *ast.ValueSpec, *ast.AssignStmt, *ast.Field:
		// A call of a function value.
		if ft, ok := l.underlying(l.identType(id, depth), depth).(*ast.FuncType); ok {
			if r := ft.Results; r != nil && len(r.List) == 1 && len(r.List[0].Names) <= 1 {
				return r.List[0].Type
			}
		}
	}
	return nil
}

// identType returns the declared type of the variable id.
func (l *linter) identType(id *ast.Ident, depth int) ast.Expr {
	obj := id.Obj
	if obj == nil || obj.Kind != ast.Var || depth > maxDepth {
		return nil
	}
	switch d := obj.Decl.(type) {
	case *ast.Field: // parameter, result or receiver
		return d.Type
	case *ast.ValueSpec:
		if d.Type != nil {
			return d.Type
		}
		for i, name := range d.Names {
			if name.Name == id.Name && len(d.Values) == len(d.Names) {
				return l.typeOf(d.Values[i], depth+1)
			}
		}
	case *ast.AssignStmt:
		for i, lhs := range d.Lhs {
			if name, ok := lhs.(*ast.Ident); !ok || name.Name != id.Name {
				continue
			}
			if len(d.Lhs) == len(d.Rhs) {
				return l.typeOf(d.Rhs[i], depth+1)
			}
			// The resolver records `for k, v := range x` as
			// `k, v := range x`.
			if len(d.Rhs) == 1 {
				if u, ok := d.Rhs[0].(*ast.UnaryExpr); ok && u.Op == token.RANGE {
					return l.rangeVarType(u.X, i, depth+1)
				}
			}
			return nil
		}
	}
	return nil
}

// rangeVarType returns the type of the i-th iteration variable of a range
// over x.
func (l *linter) rangeVarType(x ast.Expr, i, depth int) ast.Expr {
	switch t := l.underlying(l.typeOf(x, depth), depth).(type) {
	case *ast.MapType:
		if i == 0 {
			return t.Key
		}
		return t.Value
	case *ast.ArrayType:
		if i == 1 {
			return t.Elt
		}
	}
	return nil
}

// fieldType returns the type of field name of a value of type t, following
// a pointer and embedded fields.
func (l *linter) fieldType(t ast.Expr, name string, depth int) ast.Expr {
	if depth > maxDepth {
		return nil
	}
	u := l.underlying(t, depth)
	if p, ok := u.(*ast.StarExpr); ok {
		u = l.underlying(p.X, depth)
	}
	st, ok := u.(*ast.StructType)
	if !ok || st.Fields == nil {
		return nil
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == name {
				return f.Type
			}
		}
	}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			if ft := l.fieldType(f.Type, name, depth+1); ft != nil {
				return ft
			}
		}
	}
	return nil
}

// underlying follows named types declared in the same file (and type
// parameters with a single ~T constraint) to their definition.
func (l *linter) underlying(t ast.Expr, depth int) ast.Expr {
	for ; t != nil && depth <= maxDepth; depth++ {
		switch x := ast.Unparen(t).(type) {
		case *ast.Ident:
			if x.Obj == nil || x.Obj.Kind != ast.Typ {
				return x
			}
			switch d := x.Obj.Decl.(type) {
			case *ast.TypeSpec:
				t = d.Type
			case *ast.Field: // type parameter
				t = d.Type
			default:
				return x
			}
		case *ast.UnaryExpr: // ~T in a type parameter's constraint
			if x.Op != token.TILDE {
				return x
			}
			t = x.X
		case *ast.IndexExpr: // generic instantiation
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		default:
			return x
		}
	}
	return nil
}

func (l *linter) isMap(t ast.Expr, depth int) bool {
	_, ok := l.underlying(t, depth).(*ast.MapType)
	return ok
}
