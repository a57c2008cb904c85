// Command fencesim-liveclient is the client process of a live run
// (simrun live) against a service of fencesim's HTTP lock API: the
// reference (fencesim-node) and lockd (fencesim-lockd). The harness
// starts one per workload client and drives it on stdin/stdout; see
// package liveclient.
package main

import (
	"github.com/fencesim/fencesim/live/apilocker"
	"github.com/fencesim/fencesim/live/liveclient"
)

func main() { liveclient.Main(apilocker.Open) }
