package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// LatencyShape names the distribution of one-way message latency.
type LatencyShape uint8

const (
	// Uniform draws latency uniformly from [Min, Max].
	Uniform LatencyShape = iota
	// Exponential draws Min + an exponential tail of mean Mean, capped at
	// Max: most messages are fast, a few are slow, as on a real LAN.
	Exponential
)

// Latency is a per-message latency distribution.
type Latency struct {
	Shape LatencyShape
	Min   time.Duration
	Mean  time.Duration // Exponential: mean of the tail above Min
	Max   time.Duration
}

// NetworkConfig sets the network's behaviour. Probabilities are per message.
type NetworkConfig struct {
	Latency              Latency
	LossProbability      float64       // the message vanishes
	DuplicateProbability float64       // a second copy is delivered, with its own latency
	ReorderProbability   float64       // the message is held back by up to ReorderDelayMax extra
	ReorderDelayMax      time.Duration //
}

// DefaultNetwork is a quiet LAN: 0.5–5 ms, no loss.
func DefaultNetwork() NetworkConfig {
	return NetworkConfig{Latency: Latency{Shape: Exponential, Min: 500 * time.Microsecond, Mean: time.Millisecond, Max: 5 * time.Millisecond}}
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c NetworkConfig) Validate() error {
	l := c.Latency
	switch {
	case l.Shape != Uniform && l.Shape != Exponential:
		return fmt.Errorf("sim: unknown latency shape %d (use Uniform or Exponential)", l.Shape)
	case l.Min < 0:
		return errors.New("sim: latency min must be ≥ 0")
	case l.Max < l.Min:
		return fmt.Errorf("sim: latency max %v is below min %v", l.Max, l.Min)
	case l.Shape == Exponential && l.Mean <= 0:
		return errors.New("sim: exponential latency needs a mean > 0")
	case c.ReorderDelayMax < 0:
		return errors.New("sim: reorder delay max must be ≥ 0")
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", c.LossProbability}, {"duplicate", c.DuplicateProbability}, {"reorder", c.ReorderProbability}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("sim: %s probability %v must be within [0, 1]", p.name, p.v)
		}
	}
	return nil
}

// network decides the fate of every message: delay, loss, duplication, and
// blocked links. It draws from its own random stream, so adding a node does
// not change the network's draws for existing traffic.
type network struct {
	cfg     NetworkConfig
	rng     *rand.Rand
	n       int
	blocked []bool // n×n, blocked[from*n+to]: the directed link drops everything

	sent, delivered, dropped, duplicated int
}

func (nw *network) grow(n int) {
	b := make([]bool, n*n)
	for f := 0; f < nw.n; f++ {
		copy(b[f*n:f*n+nw.n], nw.blocked[f*nw.n:(f+1)*nw.n])
	}
	nw.blocked, nw.n = b, n
}

func (nw *network) isBlocked(from, to NodeID) bool {
	return nw.blocked[int(from)*nw.n+int(to)]
}

func (nw *network) setBlocked(from, to NodeID, v bool) {
	nw.blocked[int(from)*nw.n+int(to)] = v
}

// fate is what the network does to one message.
type fate struct {
	lost    bool
	copies  int
	latency [2]time.Duration
}

// decide draws one message's fate. It draws the same eight numbers for
// every message, whatever the loss, duplication, reorder and latency
// settings: a fault that changes them then changes only the fate of the
// messages it covers, not the draws of every later message. That is what
// lets a shrunk fault schedule replay the rest of a run unchanged. The
// eight are the halves of four 64-bit draws (32 bits is resolution enough
// for a probability or a latency), and the second copy's latency is only
// computed for a duplicated message.
func (nw *network) decide() fate {
	var u [8]float64
	for i := 0; i < len(u); i += 2 {
		x := nw.rng.Uint64()
		u[i], u[i+1] = float64(x>>32)*0x1p-32, float64(uint32(x))*0x1p-32
	}
	c := nw.cfg
	f := fate{lost: u[0] < c.LossProbability, copies: 1}
	f.latency[0] = nw.latency(u[2], u[3], u[4])
	if u[1] < c.DuplicateProbability {
		f.copies = 2
		f.latency[1] = nw.latency(u[5], u[6], u[7])
	}
	return f
}

// latency maps three uniform draws in [0, 1) to one copy's delay: the base
// latency from the configured shape, plus a reorder hold-back.
func (nw *network) latency(base, reorder, extra float64) time.Duration {
	l := nw.cfg.Latency
	var d time.Duration
	switch l.Shape {
	case Exponential:
		x := -math.Log1p(-base) * float64(l.Mean) // inverse CDF of the exponential
		d = l.Min + time.Duration(x)
		if x >= float64(l.Max-l.Min) || d < l.Min { // also guards the cast
			d = l.Max
		}
	default:
		d = l.Min + time.Duration(base*float64(l.Max-l.Min+1))
		d = min(d, l.Max)
	}
	if reorder < nw.cfg.ReorderProbability && nw.cfg.ReorderDelayMax > 0 {
		d += time.Duration(extra * float64(nw.cfg.ReorderDelayMax+1))
	}
	return d
}

// NetworkStats counts the fate of messages over a run.
type NetworkStats struct {
	Sent       int // Send calls
	Delivered  int // copies handed to a live process
	Dropped    int // lost, blocked, or addressed to a crashed incarnation
	Duplicated int // extra copies created
}
