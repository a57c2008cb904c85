package testhooks

import (
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MaxApplies is how many entries an ApplyLog keeps; older ones are
// dropped (a page's first_seq shows it).
const MaxApplies = 1 << 20

// Apply is one decided write as the store applied it.
type Apply struct {
	Seq      uint64 `json:"seq"`
	Key      string `json:"key"`
	Value    int64  `json:"value"`
	Token    uint64 `json:"token"`
	Accepted bool   `json:"accepted"`
	MonoNs   int64  `json:"mono_ns"` // CLOCK_MONOTONIC after the apply's fsync
}

// AppliesPage is /test/applies's answer.
type AppliesPage struct {
	BootMonoNs int64   `json:"boot_mono_ns"` // CLOCK_MONOTONIC when the log began: a new value is a restarted store
	FirstSeq   uint64  `json:"first_seq"`    // the oldest entry kept (1 until MaxApplies are exceeded)
	LastSeq    uint64  `json:"last_seq"`     // the newest entry (0: none yet)
	More       bool    `json:"more"`         // entries after this page exist
	Applies    []Apply `json:"applies"`
}

// ApplyLog is the store's apply log, in the order the store decided. It
// is safe for concurrent use.
type ApplyLog struct {
	mu      sync.Mutex
	boot    int64
	first   uint64 // seq of entries[0]
	entries []Apply
}

// NewApplyLog returns an empty log stamped with the boot time.
func NewApplyLog() *ApplyLog {
	return &ApplyLog{boot: MonoNow(), first: 1}
}

// MonoNow reads CLOCK_MONOTONIC in nanoseconds. Go's time package
// measures its monotonic readings from its own process start, which
// another process cannot see; clock_gettime gives the machine's, which
// every process on it shares.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("testhooks: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // cannot fail on a supported kernel
	}
	return ts.Nano()
}

// Record appends one apply, stamped now.
func (l *ApplyLog) Record(key string, value int64, token uint64, accepted bool) {
	now := MonoNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) == MaxApplies {
		copy(l.entries, l.entries[MaxApplies/2:])
		l.entries = l.entries[:MaxApplies-MaxApplies/2]
		l.first += MaxApplies / 2
	}
	seq := l.first + uint64(len(l.entries))
	l.entries = append(l.entries, Apply{Seq: seq, Key: key, Value: value, Token: token, Accepted: accepted, MonoNs: now})
}

// Page returns up to limit entries with seq > after.
func (l *ApplyLog) Page(after uint64, limit int) AppliesPage {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := AppliesPage{BootMonoNs: l.boot, FirstSeq: l.first, LastSeq: l.first + uint64(len(l.entries)) - 1, Applies: []Apply{}}
	start := 0
	if after >= l.first {
		start = int(min(after-l.first+1, uint64(len(l.entries))))
	}
	end := min(start+limit, len(l.entries))
	p.Applies = append(p.Applies, l.entries[start:end]...)
	p.More = end < len(l.entries)
	return p
}

func (l *ApplyLog) serve(w http.ResponseWriter, r *http.Request) {
	after, err := parseQueryInt(r, "after", 0, 0, math.MaxInt64)
	if err != nil {
		invalid(w, "after", "%v", err)
		return
	}
	limit, err := parseQueryInt(r, "limit", MaxPage, 1, MaxPage)
	if err != nil {
		invalid(w, "limit", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, l.Page(uint64(after), int(limit)))
}

// since reports how long ago a CLOCK_MONOTONIC reading was (tests).
func since(monoNs int64) time.Duration { return time.Duration(MonoNow() - monoNs) }
