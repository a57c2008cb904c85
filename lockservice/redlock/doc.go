// Package redlock is the Redlock contrast design: N independent nodes that
// each SET NX PX, and a client Protocol that holds the lock on a majority
// within validity = TTL − elapsed − drift. Its tokens are random values no
// store can order, which is what the harness shows.
package redlock
