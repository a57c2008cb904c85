// Package fencedstore is the storage a lock protects: FencedStore accepts
// write(resource, value, token) iff token ≥ the highest token it has
// accepted for the resource, deduplicates retried writes, and syncs each
// decision to disk before it replies. Every design of the harness writes
// through it (a design may turn fencing off).
package fencedstore
