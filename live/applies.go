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
)

// appliesLog collects the store's apply log (GET /test/applies?after=N,
// FENCESIM_TEST_HOOKS=1) across the store's incarnations: fetched before
// every crash and at the end. An entry of a crashed incarnation that no
// client was told of and that no later incarnation shows is marked lost:
// its sync may not have completed, and the checker ignores lost records,
// as it ignores the simulator's decisions a crash took back (so a lost
// entry can hide a finding, never make one).
type appliesLog struct {
	url string

	mu      sync.Mutex
	entries []applyEntry
	byValue map[int64]int
	after   uint64
	err     error
}

type applyEntry struct {
	storeApply
	lost bool
}

// fetch reads the entries after the cursor, page by page (bounded).
func (a *appliesLog) fetch(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byValue == nil {
		a.byValue = map[int64]int{}
	}
	for page := 0; page < 10000; page++ {
		batch, err := a.page(ctx, a.after)
		if err != nil {
			a.err = err
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, e := range batch {
			a.after = max(a.after, e.Seq)
			if i, dup := a.byValue[e.Value]; dup && e.Value != 0 {
				a.entries[i].lost = false // a later incarnation has it: it survived
				continue
			}
			a.byValue[e.Value] = len(a.entries)
			a.entries = append(a.entries, applyEntry{storeApply: e})
		}
	}
	return fmt.Errorf("live: the store's apply log did not end after 10000 pages")
}

func (a *appliesLog) page(ctx context.Context, after uint64) ([]storeApply, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/test/applies?after="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /test/applies: %s (is fencesim-store built with the test hooks of FENCESIM_TEST_HOOKS=1?)", resp.Status)
	}
	return decodeApplies(b)
}

// decodeApplies reads either a bare array or an object with an
// "applies" array.
func decodeApplies(b []byte) ([]storeApply, error) {
	var list []storeApply
	if err := json.Unmarshal(b, &list); err == nil {
		return list, nil
	}
	var obj struct {
		Applies []storeApply `json:"applies"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("live: undecodable apply log: %w", err)
	}
	return obj.Applies, nil
}

// crashed marks the current incarnation's entries as possibly lost and
// restarts the cursor for the next incarnation.
func (a *appliesLog) crashed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.entries {
		a.entries[i].lost = true
	}
	a.after = 0
}

func (a *appliesLog) all() ([]applyEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.entries, a.err
}
