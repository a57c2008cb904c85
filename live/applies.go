package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fencesim/fencesim/internal/testhooks"
)

// appliesLog collects the store's apply log (GET /test/applies?after=N,
// FENCESIM_TEST_HOOKS=1) across the store's incarnations: the log is in
// the store's memory and starts again at seq 1 after a restart (a new
// boot_mono_ns), so it is read before every crash and at the end. An
// entry is logged only after its fsync, so each is a durable decision,
// even if the store crashed right after.
type appliesLog struct {
	url string

	mu      sync.Mutex
	entries []testhooks.Apply
	boot    int64
	after   uint64
	err     error
}

// fetch reads the current incarnation's entries after the cursor, page
// by page (bounded).
func (a *appliesLog) fetch(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 100_000 {
		p, err := a.page(ctx, a.after)
		if err != nil {
			a.err = err
			return err
		}
		if p.BootMonoNs != a.boot {
			if a.after != 0 {
				// A restart nobody told us of: entries of the old
				// incarnation after the cursor are gone.
				a.err = fmt.Errorf("the store restarted unseen (boot %d, then %d)", a.boot, p.BootMonoNs)
				return a.err
			}
			a.boot = p.BootMonoNs
		}
		if p.FirstSeq > a.after+1 && len(p.Applies) > 0 {
			a.err = fmt.Errorf("the store's apply log dropped entries %d..%d (it keeps the last %d)", a.after+1, p.FirstSeq-1, p.LastSeq-p.FirstSeq+1)
			return a.err
		}
		for _, e := range p.Applies {
			a.after = max(a.after, e.Seq)
			a.entries = append(a.entries, e)
		}
		if !p.More || len(p.Applies) == 0 {
			return nil
		}
	}
	a.err = fmt.Errorf("the store's apply log did not end after 100000 pages")
	return a.err
}

func (a *appliesLog) page(ctx context.Context, after uint64) (testhooks.AppliesPage, error) {
	var p testhooks.AppliesPage
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/test/applies?after="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		return p, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("GET /test/applies: %s (does fencesim-store run with FENCESIM_TEST_HOOKS=1?)", resp.Status)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("GET /test/applies: undecodable answer: %w", err)
	}
	return p, nil
}

// crashed starts the cursor again for the next incarnation.
func (a *appliesLog) crashed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.after, a.boot = 0, 0
}

func (a *appliesLog) all() ([]testhooks.Apply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.entries, a.err
}
