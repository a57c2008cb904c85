package live

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// linkSet holds a run's proxies, one per directed link (from dials to),
// and carries out the network faults on them.
type linkSet struct {
	mu      sync.Mutex
	seed    uint64
	proxies []*proxy
	// net are the whole network's faults in force: a fault ends after
	// its duration unless a later one is still on, as in nemesis.
	net []netFault
}

// netFault is one network-wide fault in force until end (0: a reset).
type netFault struct {
	end              time.Time
	delayMean, delay time.Duration
	loss             float64
}

func (l *linkSet) add(from, to, addr string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		if p.from == from && p.to == to && p.target == addr {
			return p.addr(), nil
		}
	}
	p, err := newProxy(from, to, addr, l.seed+uint64(len(l.proxies)))
	if err != nil {
		return "", err
	}
	l.proxies = append(l.proxies, p)
	return p.addr(), nil
}

// block blackholes from→to: the Tx side of the links from dials to, the
// Rx side of the links to dials from.
func (l *linkSet) block(from, to string, on bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.proxies {
		switch {
		case p.from == from && p.to == to:
			p.set(true, false, func(d *dirState) { d.blackhole = on })
			n++
		case p.from == to && p.to == from:
			p.set(false, true, func(d *dirState) { d.blackhole = on })
			n++
		}
	}
	return n
}

// cut blackholes both directions between every pair on different sides
// of side (a node is on side A when side reports true).
func (l *linkSet) cut(side func(string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.proxies {
		if side(p.from) != side(p.to) {
			p.set(true, true, func(d *dirState) { d.blackhole = true })
			n++
		}
	}
	return n
}

// heal reopens every link.
func (l *linkSet) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.set(true, true, func(d *dirState) { d.blackhole = false })
	}
}

// hush makes every link to or from node drop what it carries, both ways,
// until it is lifted, whatever other faults are in force (they are kept
// and apply again after). The store's crash hushes its links before
// reading its apply log for the last time: the log lives in the store's
// memory, and a write the store decided after that read and answered
// before the kill would be acknowledged with no apply on record (S5)
// though the store did nothing wrong. Hushed, an answer that reaches the
// client left the store before the read began, and the store logs a
// write before it answers, so every acknowledged write is in the log.
func (l *linkSet) hush(node string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		if p.from == node || p.to == node {
			p.hush(on)
		}
	}
}

// resetNode closes every connection to or from node (its crash: the
// peers' connections to it are refused or cut, as without a proxy).
func (l *linkSet) resetNode(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		if p.from == node || p.to == node {
			p.reset()
		}
	}
}

// netFault puts a network-wide fault in force until end, or with zero
// fault values ends them all (network-reset).
func (l *linkSet) netFault(f netFault, reset bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if reset {
		l.net = nil
	} else {
		l.net = append(l.net, f)
	}
	l.applyNet(time.Now())
}

// expire drops the network faults past their end; the fault loop calls it.
func (l *linkSet) expire(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyNet(now)
}

// applyNet sets every link to the strongest of the faults in force.
func (l *linkSet) applyNet(now time.Time) {
	l.net = slices.DeleteFunc(l.net, func(f netFault) bool { return !now.Before(f.end) })
	var sum netFault
	for _, f := range l.net {
		if f.delay > sum.delay {
			sum.delay, sum.delayMean = f.delay, f.delayMean
		}
		sum.loss = max(sum.loss, f.loss)
	}
	for _, p := range l.proxies {
		p.set(true, true, func(d *dirState) { d.delay, d.delayMean, d.loss = sum.delay, sum.delayMean, sum.loss })
	}
}

// close stops every proxy.
func (l *linkSet) close() {
	l.mu.Lock()
	ps := l.proxies
	l.proxies = nil
	l.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
}

func (l *linkSet) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d links", len(l.proxies))
}
