package sim

import "github.com/fencesim/fencesim/process"

// The process contract lives in package process, which imports nothing of
// fencesim, so that the same process code runs in the simulator and for
// real. These aliases keep the sim names working (sim.Process is
// process.Process, and so on); new code names package process directly.
type (
	// NodeID is an alias of process.NodeID.
	NodeID = process.NodeID
	// Message is an alias of process.Message.
	Message = process.Message
	// Process is an alias of process.Process.
	Process = process.Process
	// Env is an alias of process.Env.
	Env = process.Env
)
