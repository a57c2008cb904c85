package lockd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/lockd/scripts"
)

// waker hands the wake channel's messages (scripts.Queue) to this
// instance's waiters. It subscribes on the first wait, once, and keeps the
// subscription (go-redis re-subscribes after a reconnect); a waiter that
// finds no subscription (Redis unreachable) still waits, polling at its
// refresh.
type waker struct {
	rdb     redis.UniversalClient
	channel string
	log     *slog.Logger

	subMu sync.Mutex    // held while subscribing, so that waiters wait for it
	ps    *redis.PubSub // under subMu and mu; nil until subscribed
	// notBefore (under subMu): after a failed subscription, waiters poll
	// until then instead of each trying again.
	notBefore time.Time

	mu      sync.Mutex
	waiters map[string][]chan string // by wake key (scripts.Wake)
	closed  bool
}

func newWaker(rdb redis.UniversalClient, channel string, log *slog.Logger) *waker {
	return &waker{rdb: rdb, channel: channel, log: log, waiters: map[string][]chan string{}}
}

// listen registers a waiter for key before its first acquire runs, so that
// no message published after that run is missed: the returned channel
// receives what follows the key in each message (scripts.SplitWake; the
// latest, if the waiter is behind), until stop.
func (w *waker) listen(ctx context.Context, key string) (woken <-chan string, stop func()) {
	ch := make(chan string, 1)
	w.mu.Lock()
	w.waiters[key] = append(w.waiters[key], ch)
	w.mu.Unlock()
	w.subscribe(ctx)
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		l := w.waiters[key]
		for i, c := range l {
			if c == ch {
				l = append(l[:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(w.waiters, key)
		} else {
			w.waiters[key] = l
		}
	}
}

// subscribe subscribes to the wake channel unless it is already, waiting
// (at most a second, or ctx) for Redis to confirm it; after a failure it
// does not try again for a second.
func (w *waker) subscribe(ctx context.Context) {
	w.subMu.Lock()
	defer w.subMu.Unlock()
	w.mu.Lock()
	done := w.ps != nil || w.closed
	w.mu.Unlock()
	if done || time.Now().Before(w.notBefore) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ps := w.rdb.Subscribe(cctx, w.channel)
	if _, err := ps.Receive(cctx); err != nil {
		ps.Close()
		w.notBefore = time.Now().Add(time.Second)
		w.log.Warn("lockd: cannot subscribe to the wait queue's wake channel; waiters poll", slog.String("channel", w.channel), slog.Any("err", err))
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		ps.Close()
		return
	}
	w.ps = ps
	w.mu.Unlock()
	go w.route(ps.Channel())
}

func (w *waker) route(ch <-chan *redis.Message) {
	for m := range ch {
		key, rest := scripts.SplitWake(m.Payload)
		w.mu.Lock()
		for _, c := range w.waiters[key] {
			// The only sender: a full buffer is emptied and refilled.
			select {
			case c <- rest:
			default:
				select {
				case <-c:
				default:
				}
				c <- rest
			}
		}
		w.mu.Unlock()
	}
}

func (w *waker) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps == nil {
		return nil
	}
	return w.ps.Close()
}
