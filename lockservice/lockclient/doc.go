// Package lockclient is the lock client library: Lock holds one client's
// lock on one resource — the acquirer, the lease renewer, the watchdog and
// the release handler — and reports the client events the checker needs.
// It speaks the reference's messages, or a design's own through the
// design's lockservice.Protocol. It runs no workload: the code that uses
// the lock (the harness's scenarios/workload) drives it through Acquire,
// Holding, Token, Lose and Release, and hears back through a Handler.
//
// The same state machine is the Go client of the HTTP lock API
// (lockapi/lockclient), hosted on a real clock with HTTP as its
// transport; Options, ReceiveHint, NoAnswer and ReleaseResult are what
// that transport needs beyond the simulator's messages, and leave the
// simulator's client as it was when unused.
package lockclient
