package inject

import (
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

// appliers carries out each fault kind in a simulated world. What each
// kind means, and what is inside and outside its fault model, is said in
// its file in package nemesis (pause.go, crash.go, …).
var appliers = map[nemesis.Kind]func(x *injector, op nemesis.Op){
	nemesis.Pause: func(x *injector, op nemesis.Op) {
		if id, ok := x.node(op.Node); ok {
			x.cov.pause(x.w, id)
			x.w.Pause(id, time.Duration(op.Duration))
		}
	},
	nemesis.Crash: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		x.cov.beforeCrash(x.w, id)
		if op.Mode == nemesis.CrashTorn {
			x.w.CrashTorn(id, op.Keep)
		} else {
			x.w.Crash(id)
		}
		x.cov.afterCrash(x.w, id)
		x.until(op, func() { x.w.Restart(id) })
	},
	nemesis.Restart: func(x *injector, op nemesis.Op) {
		if op.Node == nemesis.Crashed {
			for n := range x.w.Nodes() {
				x.w.Restart(sim.NodeID(n)) // a no-op on live nodes
			}
			return
		}
		if id, ok := x.node(op.Node); ok {
			x.w.Restart(id)
		}
	},
	nemesis.Isolate: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		links := func(set func(from, to sim.NodeID)) {
			for other := range x.w.Nodes() {
				if o := sim.NodeID(other); o != id {
					set(id, o)
					set(o, id)
				}
			}
		}
		links(x.w.Block)
		x.until(op, func() { links(x.w.Unblock) })
	},
	nemesis.Partition: func(x *injector, op nemesis.Op) {
		in := make([]bool, x.w.Nodes())
		var side []sim.NodeID
		for _, name := range op.Group {
			if id, ok := x.node(name); ok && !in[id] {
				in[id] = true
				side = append(side, id)
			}
		}
		var rest []sim.NodeID
		for n := range in {
			if !in[n] {
				rest = append(rest, sim.NodeID(n))
			}
		}
		x.w.Partition(side, rest) // a no-op when either side is empty
	},
	nemesis.Block: func(x *injector, op nemesis.Op) {
		from, ok1 := x.node(op.Node)
		to, ok2 := x.node(op.To)
		if ok1 && ok2 && from != to {
			x.w.Block(from, to)
		}
	},
	nemesis.Heal: func(x *injector, _ nemesis.Op) { x.w.Heal() },
	nemesis.Loss: func(x *injector, op nemesis.Op) {
		networkFault(x, op, func(c sim.NetworkConfig) sim.NetworkConfig {
			c.LossProbability = op.Probability
			return c
		})
	},
	nemesis.Duplicate: func(x *injector, op nemesis.Op) {
		networkFault(x, op, func(c sim.NetworkConfig) sim.NetworkConfig {
			c.DuplicateProbability = op.Probability
			return c
		})
	},
	nemesis.Delay: func(x *injector, op nemesis.Op) {
		networkFault(x, op, func(c sim.NetworkConfig) sim.NetworkConfig {
			// A spike only raises latency: Min stays, Mean and Max grow.
			c.Latency.Shape = sim.Exponential
			c.Latency.Mean = max(c.Latency.Mean, time.Duration(op.Mean))
			c.Latency.Max = max(c.Latency.Max, time.Duration(op.Delay))
			return c
		})
	},
	nemesis.Reorder: func(x *injector, op nemesis.Op) {
		networkFault(x, op, func(c sim.NetworkConfig) sim.NetworkConfig {
			c.ReorderProbability, c.ReorderDelayMax = op.Probability, time.Duration(op.Delay)
			return c
		})
	},
	nemesis.NetworkReset: func(x *injector, _ nemesis.Op) {
		if base, ok := x.net.reset(); ok {
			_ = x.w.SetNetwork(base)
		}
	},
	nemesis.Drift: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		clock := x.w.Clock(id)
		s := nodeStack(&x.drift, id)
		layer, ppm := s.push(clock.DriftPPM(), func(int64) int64 { return op.PPM })
		_ = clock.SetDriftPPM(ppm) // in range: checked
		x.until(op, func() {
			if ppm, ok := nodeStack(&x.drift, id).pop(layer); ok {
				_ = clock.SetDriftPPM(ppm)
			}
		})
	},
	nemesis.Jump: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		clock := x.w.Clock(id)
		layer, _ := nodeStack(&x.jumps, id).push(0, func(d time.Duration) time.Duration { return d })
		x.cov.jump(x.w, id, time.Duration(op.By))
		clock.JumpWall(time.Duration(op.By))
		x.until(op, func() {
			if _, ok := nodeStack(&x.jumps, id).pop(layer); ok {
				clock.JumpWall(-time.Duration(op.By))
			}
		})
	},
	nemesis.ClockReset: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		clock := x.w.Clock(id)
		nodeStack(&x.drift, id).reset()
		nodeStack(&x.jumps, id).reset()
		_ = clock.SetDriftPPM(0)
		clock.JumpWall(-clock.WallOffset())
	},
	nemesis.SlowDisk: func(x *injector, op nemesis.Op) {
		id, ok := x.node(op.Node)
		if !ok {
			return
		}
		layer, d := nodeStack(&x.disk, id).push(x.w.SyncDelay(id), func(time.Duration) time.Duration { return time.Duration(op.Delay) })
		x.w.SetSyncDelay(id, d)
		x.until(op, func() {
			if d, ok := nodeStack(&x.disk, id).pop(layer); ok {
				x.w.SetSyncDelay(id, d)
			}
		})
	},
}

// networkFault applies set to the network while op is on.
func networkFault(x *injector, op nemesis.Op, set func(sim.NetworkConfig) sim.NetworkConfig) {
	id, cfg := x.net.push(x.w.Network(), set)
	_ = x.w.SetNetwork(cfg) // valid: every op passed Check, and set keeps the rest
	x.until(op, func() {
		if cfg, ok := x.net.pop(id); ok {
			_ = x.w.SetNetwork(cfg)
		}
	})
}
