// Package lockservice is the plug-in contract of fencesim's lock designs,
// what a lock author imports and all of it: Design and what the harness
// tells a design (DesignInfo, DesignRun); the client protocol
// (AcquireRequest, RenewRequest, ReleaseRequest, LockReply) and the
// fenced store's (WriteRequest, WriteReply, ReadRequest, ReadReply); the
// events the checker judges (Event, Observer); the bounds on requests
// (Limits); the lock client's configuration (ClientConfig) and, for a
// design whose service speaks other messages, the Protocol that translates
// for it. It depends on the process contract and the standard library
// only.
//
// The rest lives beside it: the reference service in lockservice/reference
// (over lockservice/raft), the fenced store in lockservice/fencedstore, the
// lock client library in lockservice/lockclient, Redlock in
// lockservice/redlock, the planted bugs in lockservice/mutants and the
// built-in designs in lockservice/designs; the workload the harness's
// clients run is scenarios/workload.
package lockservice
