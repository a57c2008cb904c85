// Package lockclient is the lock client library: Lock holds one client's
// lock on one resource — the acquirer, the lease renewer, the watchdog and
// the release handler — and reports the client events the checker needs.
// It speaks the reference's messages, or a design's own through the
// design's lockservice.Protocol. It runs no workload: the code that uses
// the lock (the harness's scenarios/workload) drives it through Acquire,
// Holding, Token, Lose and Release, and hears back through a Handler.
package lockclient
