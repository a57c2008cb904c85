// Command fencesim-live-redlock is the client process of simrun live's
// redlock target: redsync (github.com/go-redsync/redsync/v4) over the
// target's redis-server processes, driven by the harness's protocol on
// stdin/stdout (package liveclient). The harness starts it; by hand:
//
//	fencesim-live-redlock -client a -endpoints 127.0.0.1:6379,… -store http://127.0.0.1:8080
package main

import (
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/live/redlockclient"
)

func main() { liveclient.Main(redlockclient.Open) }
