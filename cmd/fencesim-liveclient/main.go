// Command fencesim-liveclient is the client process of a live run
// (simrun live) against a service of fencesim's HTTP lock API: the
// reference (fencesim-node) and lockd (fencesim-lockd). The harness
// starts one per workload client and drives it on stdin/stdout; see
// package liveclient. Its lock client is the one we ship,
// lockapi/lockclient (package shipped adapts it to the protocol), so a
// live run chaos-tests it.
package main

import (
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/live/shipped"
)

func main() { liveclient.Main(shipped.Open) }
