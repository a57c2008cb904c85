package lockservice

import (
	"fmt"
	"time"
)

// Limits bound what a request may ask for. Requests outside them are
// answered Invalid with a message, never a panic.
type Limits struct {
	MaxNameBytes int           // resource and client names
	MinTTL       time.Duration // a lease shorter than this cannot be renewed in time
	MaxTTL       time.Duration // a lease longer than this holds a crashed client's lock too long
}

// DefaultLimits suits the simulated workloads: names up to 128 bytes, TTLs
// from 10 ms to 10 minutes.
func DefaultLimits() Limits {
	return Limits{MaxNameBytes: 128, MinTTL: 10 * time.Millisecond, MaxTTL: 10 * time.Minute}
}

func (l Limits) CheckNames(resource, client string) error {
	switch {
	case resource == "":
		return fmt.Errorf("lockservice: empty resource name")
	case len(resource) > l.MaxNameBytes:
		return fmt.Errorf("lockservice: resource name of %d bytes exceeds the limit of %d", len(resource), l.MaxNameBytes)
	case client == "":
		return fmt.Errorf("lockservice: empty client name")
	case len(client) > l.MaxNameBytes:
		return fmt.Errorf("lockservice: client name of %d bytes exceeds the limit of %d", len(client), l.MaxNameBytes)
	}
	return nil
}

// CheckAcquire validates an acquire request.
func (l Limits) CheckAcquire(r AcquireRequest) error {
	if err := l.CheckNames(r.Resource, r.Client); err != nil {
		return err
	}
	switch {
	case r.TTL <= 0:
		return fmt.Errorf("lockservice: ttl %v must be positive", r.TTL)
	case r.TTL < l.MinTTL:
		return fmt.Errorf("lockservice: ttl %v is below the minimum of %v", r.TTL, l.MinTTL)
	case r.TTL > l.MaxTTL:
		return fmt.Errorf("lockservice: ttl %v exceeds the maximum of %v", r.TTL, l.MaxTTL)
	}
	return nil
}

// CheckHeld validates a renew or release of token by client.
func (l Limits) CheckHeld(resource, client string, token uint64) error {
	if err := l.CheckNames(resource, client); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("lockservice: token 0 is never granted")
	}
	return nil
}

// CheckRenew validates a renew request: a held lock's names and token,
// and a TTL that is 0 (keep the lease's) or within the acquire's bounds.
func (l Limits) CheckRenew(r RenewRequest) error {
	if err := l.CheckHeld(r.Resource, r.Client, r.Token); err != nil {
		return err
	}
	if r.TTL != 0 {
		return l.CheckAcquire(AcquireRequest{Resource: r.Resource, Client: r.Client, TTL: r.TTL})
	}
	return nil
}

// CheckRelease validates a release request: a held lock's names and
// token, and a RequestID no longer than a name.
func (l Limits) CheckRelease(r ReleaseRequest) error {
	if err := l.CheckHeld(r.Resource, r.Client, r.Token); err != nil {
		return err
	}
	if len(r.RequestID) > l.MaxNameBytes {
		return fmt.Errorf("lockservice: request id of %d bytes exceeds the limit of %d", len(r.RequestID), l.MaxNameBytes)
	}
	return nil
}

// CheckWrite validates a store write.
func (l Limits) CheckWrite(r WriteRequest) error {
	if err := l.CheckNames(r.Resource, r.Client); err != nil {
		return err
	}
	if r.Token == 0 {
		return fmt.Errorf("lockservice: token 0 is never granted")
	}
	return nil
}
