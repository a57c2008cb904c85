package lockservice

// Observer receives what the simulator's checker needs from the service,
// the store and the clients. Processes call it at the instant something
// happens; the harness stamps each call with true time and step, which the
// processes themselves cannot see. Records come from each component's own
// decisions (the service's grants, the store's apply log), not from what
// another component believes.
type Observer interface {
	// Granted: the service granted resource to client with token.
	Granted(resource, client string, token uint64)
	// Ended: the service ended the grant with token (reason "released" or
	// "expired").
	Ended(resource string, token uint64, reason string)
	// Applied: the store decided a write (an entry of its apply log).
	Applied(resource, client string, token uint64, value int64, accepted bool)
	// WriteCalled: a client sent a write; the id pairs it with its return.
	WriteCalled(client, resource string, token uint64, value int64) (id int)
	// WriteReturned: the client received the store's decision on write id.
	WriteReturned(id int, accepted bool)
	// ReadCalled: a client sent a read.
	ReadCalled(client, resource string) (id int)
	// ReadReturned: the client received the value of read id.
	ReadReturned(id int, value int64, token uint64)
}

// NopObserver ignores everything; for unit tests and real deployments.
type NopObserver struct{}

func (NopObserver) Granted(string, string, uint64)                {}
func (NopObserver) Ended(string, uint64, string)                  {}
func (NopObserver) Applied(string, string, uint64, int64, bool)   {}
func (NopObserver) WriteCalled(string, string, uint64, int64) int { return 0 }
func (NopObserver) WriteReturned(int, bool)                       {}
func (NopObserver) ReadCalled(string, string) int                 { return 0 }
func (NopObserver) ReadReturned(int, int64, uint64)               {}
