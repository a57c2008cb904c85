package detlint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, src string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", src, parser.ParseComments)
	require.NoError(t, err, "snippet does not parse:\n%s", src)
	return fset, f
}

// wantLine is the line of src marked with a "// want" comment.
func wantLine(t *testing.T, src string) int {
	t.Helper()
	line := 0
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, "// want") {
			if line != 0 {
				t.Fatalf("several // want lines in\n%s", src)
			}
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatalf("no // want line in\n%s", src)
	}
	return line
}

type badCase struct {
	name string
	src  string // the finding is expected on the line marked "// want"
	rule string
	msg  []string // substrings of the message
}

func badCases() []badCase {
	cases := []badCase{
		// go statements
		{"go call", `package p

func f() {
	go f() // want
}
`, RuleGoStmt, []string{"go statement", "scheduled by the Go runtime"}},
		{"go func literal", `package p

func f() {
	go func() {}() // want
}
`, RuleGoStmt, []string{"go statement"}},

		// channels
		{"chan var", `package p

var c chan int // want
`, RuleChanType, []string{"channel type chan int", "runtime scheduling"}},
		{"chan result", `package p

func f() <-chan int { return nil } // want
`, RuleChanType, []string{"channel type <-chan int"}},
		{"nested chan", `package p

var c chan chan<- int // want
`, RuleChanType, []string{"channel type chan chan<- int"}},
		{"chan field", `package p

type T struct {
	c chan struct{} // want
}
`, RuleChanType, []string{"channel type"}},
		{"chan in type switch", `package p

func f(x any) {
	switch x.(type) {
	case chan int: // want
	}
}
`, RuleChanType, []string{"channel type"}},
		{"slice of chans", `package p

var s = make([]chan int, 3) // want
`, RuleChanType, []string{"channel type chan int"}},
		{"make chan", `package p

var c = make(chan int) // want
`, RuleMakeChan, []string{"make(chan int)", "channels"}},
		{"make buffered chan", `package p

func f() {
	x := make(chan string, 8) // want
	_ = x
}
`, RuleMakeChan, []string{"make(chan string)"}},
		{"send", `package p

import "example.com/q"

func f(c q.Chan) {
	c <- 1 // want
}
`, RuleChanSend, []string{"channel send c <-"}},
		{"receive expression", `package p

import "example.com/q"

func f(c q.Chan) int {
	return <-c // want
}
`, RuleChanRecv, []string{"channel receive <-c"}},
		{"receive statement", `package p

import "example.com/q"

func f(s q.S) {
	<-s.Done() // want
}
`, RuleChanRecv, []string{"channel receive <-s.Done()"}},
		{"range over channel parameter of a method", `package p

type T struct{}

func (T) Drain(c <-chan int) {
	for v := range c { // want
		_ = v
	}
}
`, RuleChanRecv, []string{"range over channel c"}},
		{"chan in function signature", `package p

func f(c chan<- int) {} // want
`, RuleChanType, []string{"channel type chan<- int"}},
		{"chan in method body", `package p

type T struct{}

func (T) F() {
	var c chan int // want
	_ = c
}
`, RuleChanType, []string{"channel type chan int"}},
		{"make chan in method returning chan", `package p

type T struct{}

func (T) After() <-chan int {
	return make(chan int) // want
}
`, RuleMakeChan, []string{"make(chan int)"}},
		{"chan in interface method", `package p

type I interface {
	After() <-chan int // want
}
`, RuleChanType, []string{"channel type <-chan int"}},
		{"empty select", `package p

func f() {
	select {} // want
}
`, RuleSelect, []string{"select statement", "at random"}},
		{"select with cases", `package p

import "example.com/q"

func f(c q.Chan) {
	select { // want
	case v := <-c:
		_ = v
	case c <- 1:
	case <-c:
	default:
	}
}
`, RuleSelect, []string{"select statement"}},

		// sync
		{"sync.Mutex", `package p

import "sync"

var mu sync.Mutex // want
`, RuleSync, []string{"sync.Mutex", `package "sync" is forbidden`, "real concurrency"}},
		{"sync.RWMutex field", `package p

import "sync"

type T struct {
	mu sync.RWMutex // want
}

func (t *T) f() {
	t.mu.Lock()
	defer t.mu.Unlock()
}
`, RuleSync, []string{"sync.RWMutex"}},
		{"sync.WaitGroup", `package p

import "sync"

func f() {
	var wg sync.WaitGroup // want
	wg.Wait()
}
`, RuleSync, []string{"sync.WaitGroup"}},
		{"sync.Once", `package p

import "sync"

var once sync.Once // want
`, RuleSync, []string{"sync.Once"}},
		{"atomic type", `package p

import "sync/atomic"

var n atomic.Int64 // want
`, RuleSync, []string{"atomic.Int64", `package "sync/atomic" is forbidden`}},
		{"atomic func", `package p

import "sync/atomic"

func f(x *int64) {
	atomic.AddInt64(x, 1) // want
}
`, RuleSync, []string{"atomic.AddInt64"}},
		{"renamed sync", `package p

import gosync "sync"

var mu gosync.Mutex // want
`, RuleSync, []string{`gosync.Mutex (import "sync")`}},

		// time
		{"renamed time", `package p

import stdtime "time"

func f() {
	_ = stdtime.Now() // want
}
`, RuleWallClock, []string{`stdtime.Now (import "time")`, "fakeclock"}},
		{"time.Sleep call", `package p

import "time"

func f(d time.Duration) {
	time.Sleep(d) // want
}
`, RuleWallClock, []string{"time.Sleep", "machine's clock"}},

		// math/rand
		{"renamed rand", `package p

import mrand "math/rand/v2"

var x = mrand.IntN(3) // want
`, RuleGlobalRand, []string{`mrand.IntN (import "math/rand/v2")`, "global source"}},
		{"rand shadowing ends at scope", `package p

import "math/rand/v2"

func f() {
	{
		rand := rand.New(rand.NewPCG(1, 2))
		_ = rand.IntN(3)
	}
	_ = rand.IntN(3) // want
}
`, RuleGlobalRand, []string{"rand.IntN"}},

		// crypto/rand
		{"crypto/rand", `package p

import "crypto/rand" // want

func f(b []byte) {
	rand.Read(b)
}
`, RuleCryptoRand, []string{`import of "crypto/rand"`, "entropy"}},
		{"renamed crypto/rand", `package p

import (
	"math/rand/v2"

	crand "crypto/rand" // want
)

var r = rand.New(rand.NewPCG(1, 2))

func f(b []byte) { crand.Read(b) }
`, RuleCryptoRand, []string{"crypto/rand"}},
		{"blank crypto/rand", `package p

import _ "crypto/rand" // want
`, RuleCryptoRand, []string{"crypto/rand"}},

		// dot imports
		{"dot import time", `package p

import . "time" // want

var t0 = Now()
`, RuleDotImport, []string{`dot import of "time"`}},

		// map ranges
		{"map literal", `package p

func f() {
	for k := range map[string]int{"a": 1} { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map map[string]int{", "randomizes map iteration order", SortedDirective}},
		{"make map", `package p

func f() {
	for range make(map[int]bool) { // want
	}
}
`, RuleMapRange, []string{"range over map make(map[int]bool)"}},
		{"short var decl", `package p

func f() {
	m := map[int]int{}
	for k, v := range m { // want
		_, _ = k, v
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"var decl with type", `package p

func f() {
	var m map[string][]int
	for _, v := range m { // want
		_ = v
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"var decl with value", `package p

func f() {
	var a, m = 1, make(map[int]int)
	_ = a
	for range m { // want
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"package var", `package p

var registry = map[string]func(){}

func f() {
	for name := range registry { // want
		_ = name
	}
}
`, RuleMapRange, []string{"range over map registry"}},
		{"parameter", `package p

func f(x int, m map[int]bool) {
	for k := range m { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"named map type", `package p

type Set map[int]struct{}

func f(s Set) {
	for k := range s { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map s"}},
		{"generic map type", `package p

type Index[K comparable, V any] map[K]V

func f(ix Index[string, int]) {
	for k := range ix { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map ix"}},
		{"type parameter", `package p

func f[M ~map[K]V, K comparable, V any](m M) {
	for k := range m { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"struct field via receiver", `package p

type Store struct {
	locks map[string]int
	order []string
}

func (s *Store) f() {
	for _, o := range s.order {
		_ = o
	}
	for name := range s.locks { // want
		_ = name
	}
}
`, RuleMapRange, []string{"range over map s.locks"}},
		{"embedded struct field", `package p

type base struct{ byID map[int]string }

type T struct {
	base
	n int
}

func f(t T) {
	for id := range t.byID { // want
		_ = id
	}
}
`, RuleMapRange, []string{"range over map t.byID"}},
		{"field of address-of literal", `package p

type T struct{ m map[int]int }

func f() {
	t := &T{}
	for range t.m { // want
	}
}
`, RuleMapRange, []string{"range over map t.m"}},
		{"index into map of maps", `package p

func f(m map[int]map[string]bool) {
	for k := range m[1] { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m[1]"}},
		{"range variable", `package p

func f(s []map[int]bool) {
	for _, inner := range s {
		for k := range inner { // want
			_ = k
		}
	}
}
`, RuleMapRange, []string{"range over map inner"}},
		{"function result", `package p

func g() map[int]int { return nil }

func f() {
	for k := range g() { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map g()"}},
		{"type assertion", `package p

func f(x any) {
	m := x.(map[int]int)
	for k := range m { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"maps.Keys iterator", `package p

import (
	"example.com/q"
	"maps"
)

func f(m q.M) {
	for k := range maps.Keys(m) { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map maps.Keys(m)"}},
		{"directive too far above", `package p

func f(m map[int]int) {
	//detlint:sorted

	for k := range m { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"misspelled directive", `package p

func f(m map[int]int) {
	//detlint:sortedkeys
	for k := range m { // want
		_ = k
	}
}
`, RuleMapRange, []string{"range over map m"}},
		{"directive does not suppress other rules", `package p

import "time"

func f() {
	//detlint:sorted
	_ = time.Now() // want
}
`, RuleWallClock, []string{"time.Now"}},
	}

	for _, name := range []string{"Now", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker", "Since", "Until"} {
		cases = append(cases, badCase{"time." + name, fmt.Sprintf(`package p

import "time"

var x = time.%s // want
`, name), RuleWallClock, []string{"time." + name + ":", "machine's clock"}})
	}
	for _, name := range []string{"IntN", "Float64", "Shuffle", "Int64", "Uint64", "Perm", "N", "Int"} {
		cases = append(cases, badCase{"rand/v2." + name, fmt.Sprintf(`package p

import "math/rand/v2"

var x = rand.%s // want
`, name), RuleGlobalRand, []string{"rand." + name + ":", "global source"}})
	}
	for _, name := range []string{"Int63", "Intn", "Seed", "Shuffle", "Float64", "Read"} {
		cases = append(cases, badCase{"rand." + name, fmt.Sprintf(`package p

import "math/rand"

func f() {
	_ = rand.%s // want
}
`, name), RuleGlobalRand, []string{"rand." + name + ":"}})
	}
	return cases
}

func TestLintFileFlagsForbiddenConstructs(t *testing.T) {
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			fset, f := parse(t, tc.src)
			line := wantLine(t, tc.src)
			got := LintFile(fset, f)
			require.Len(t, got, 1, "want exactly one finding:\n%s\nsource:\n%s", findingList(got), tc.src)
			g := got[0]
			require.Equal(t, tc.rule, g.Rule, "%s", g)
			require.Equal(t, line, g.Pos.Line, "%s", g)
			for _, s := range tc.msg {
				require.Contains(t, g.Message, s)
			}
			require.True(t, strings.HasPrefix(g.String(), fmt.Sprintf("snippet.go:%d:", line)), "String() = %q", g)
		})
	}
}

func TestLintFileAllowsDeterministicCode(t *testing.T) {
	cases := []struct{ name, src string }{
		{"seeded rand v2", `package p

import "math/rand/v2"

type node struct{ rng *rand.Rand }

func f(n *node, s rand.Source) int {
	r := rand.New(rand.NewPCG(1, 2))
	var r2 *rand.Rand = rand.New(rand.NewChaCha8([32]byte{}))
	var pcg rand.PCG
	_ = pcg
	z := rand.NewZipf(r, 1.5, 1, 10)
	_ = z.Uint64()
	r.Shuffle(3, func(i, j int) {})
	return r.IntN(3) + r2.IntN(4) + n.rng.IntN(5)
}
`},
		{"seeded rand v1", `package p

import "math/rand"

func f() int {
	r := rand.New(rand.NewSource(1))
	return r.Intn(3)
}
`},
		{"local variable shadows rand", `package p

import "math/rand/v2"

func f() int {
	rand := rand.New(rand.NewPCG(1, 2))
	return rand.IntN(3)
}

func g(rand *rand.Rand) int { return rand.IntN(3) }
`},
		{"time values", `package p

import "time"

const tick = 10 * time.Millisecond

type T struct{ timeout time.Duration }

func f(d time.Duration) time.Duration {
	t0 := time.Unix(0, 0).UTC()
	_ = t0.Add(time.Second).Sub(t0)
	return d + time.Duration(3)*time.Microsecond + tick
}
`},
		{"renamed time import", `package p

import stdtime "time"

var d stdtime.Duration = stdtime.Second
`},
		{"other package named time", `package p

import time "example.com/faketime"

var t0 = time.Now()
`},
		{"virtual clock", `package p

import "github.com/fencesim/fencesim/fakeclock"

func f(c *fakeclock.Clock) {
	_ = c.Now()
	_ = c.Since(c.Now())
}
`},
		{"ranges over non-maps", `package p

type S struct {
	items []int
	byID  map[int][]string
}

func f(s *S, xs []int, arr [3]int, str string, seq func(func(int) bool)) {
	for i, x := range xs {
		_, _ = i, x
	}
	for range arr {
	}
	for range str {
	}
	for range 10 {
	}
	for range seq {
	}
	for _, x := range []int{1, 2} {
		_ = x
	}
	for range make([]int, 3) {
	}
	for range s.items {
	}
	for range s.byID[1] {
	}
}
`},
		{"shadowed map", `package p

func f(m map[int]int) {
	{
		m := []int{1}
		for range m {
		}
	}
}
`},
		{"suppressed map ranges", `package p

import (
	"maps"
	"slices"
)

func f(m map[int]int) []int {
	var keys []int
	//detlint:sorted keys are sorted below
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sum := 0
	for _, v := range m { //detlint:sorted addition is commutative
		sum += v
	}
	//detlint:sorted
	for k := range maps.Keys(m) {
		sum += k
	}
	_ = slices.Sorted(maps.Keys(m))
	return append(keys, sum)
}
`},
		{"chan in method signature dictated by an interface", `package p

import (
	"time"

	"github.com/jonboulle/clockwork"
)

type Clock struct{}

var _ clockwork.Clock = (*Clock)(nil)

// After is required by clockwork.Clock; it never makes a channel.
func (c *Clock) After(time.Duration) <-chan time.Time { panic("use AfterFunc") }

func (c *Clock) Watch(f func(<-chan int)) {}
`},
		{"forbidden words in strings and comments", `package p

// go func() { time.Now() } and select {} and chan int.
var s = "go select chan <- time.Now() rand.IntN sync.Mutex"
`},
		{"blank and unrelated imports", `package p

import (
	_ "sync"

	"example.com/chanutil"
)

var x = chanutil.Select
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fset, f := parse(t, tc.src)
			got := LintFile(fset, f)
			require.Empty(t, got, "want no finding:\n%s\nsource:\n%s", findingList(got), tc.src)
		})
	}
}

// TestLintFileCanary checks a file full of violations: every one is found,
// in source order, so the checker is demonstrably able to fail.
func TestLintFileCanary(t *testing.T) {
	src := `package p

import (
	"math/rand/v2"
	"sync"
	"time"
)

func canary(m map[string]int) {
	var mu sync.Mutex
	c := make(chan int)
	go func() {
		time.Sleep(time.Millisecond)
		c <- rand.IntN(10)
	}()
	mu.Lock()
	<-c
	for k := range m {
		_ = k
	}
}
`
	fset, f := parse(t, src)
	got := LintFile(fset, f)
	var rules []string
	for _, g := range got {
		rules = append(rules, fmt.Sprintf("%d:%s", g.Pos.Line, g.Rule))
	}
	want := []string{
		"10:" + RuleSync,
		"11:" + RuleMakeChan,
		"12:" + RuleGoStmt,
		"13:" + RuleWallClock,
		"14:" + RuleChanSend,
		"14:" + RuleGlobalRand,
		"17:" + RuleChanRecv,
		"18:" + RuleMapRange,
	}
	require.Equal(t, want, rules, "%s", findingList(got))
}

// TestEveryRuleIsTested keeps the table in step with the rules.
func TestEveryRuleIsTested(t *testing.T) {
	tested := make(map[string]bool)
	for _, tc := range badCases() {
		tested[tc.rule] = true
	}
	for _, r := range []string{
		RuleGoStmt, RuleChanType, RuleMakeChan, RuleChanSend, RuleChanRecv, RuleSelect,
		RuleSync, RuleWallClock, RuleGlobalRand, RuleCryptoRand, RuleMapRange, RuleDotImport,
	} {
		require.True(t, tested[r], "rule %s has no test case", r)
	}
}

func findingList(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\t%s\n", f)
	}
	return b.String()
}
