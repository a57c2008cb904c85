// Package storesvc serves the fenced store over HTTP: the storage a lock
// protects, which refuses a write whose fencing token is below the highest
// it has accepted for that key (T_max). It runs the simulator's store —
// fencedstore.FencedStore, the same Start and Receive code, fed the same
// WriteRequest and ReadRequest messages — hosted by the real runtime
// (realrt) on a file disk (filedisk), so the store's Sync is an fsync and
// its reply, which the store sends only after that Sync, is what the HTTP
// answer is made from: a 200 or a 409 means T_max and the value are on disk.
//
// Routes (Go 1.22 patterns):
//
//	PUT /v1/objects/{key}   header Fencing-Token: <decimal uint64>, body: a decimal int64
//	                        → 200 {"key","token","t_max"}
//	                        → 409 {"error":"stale_token","key","token","t_max",...}
//	GET /v1/objects/{key}   → 200 {"key","value","token","t_max"} · 404 never written
//	GET /healthz  /readyz  /metrics
//
// Both answers carry T_max in the Fencing-Token-Max header as well, and a
// GET the token of the write its value came from in Fencing-Token. Tokens
// and values travel as decimal strings in JSON ("token":"18446744073709551615")
// so that a JavaScript client, whose numbers are doubles, cannot round them
// above 2^53.
//
// Values are int64. The simulator's store protocol carries an int64 value
// (WriteRequest.Value) and its trace hashes fold that value in, so
// arbitrary bytes would need a new message type and store record; until a
// deployment needs blobs, the service accepts exactly what the simulated
// store holds — a body that is not a decimal int64 is a 400 — and the
// store it runs is the one the simulator checked.
//
// Errors are {"error": code, "message", ...}, the lock API's shape (package
// lockapi): 400 invalid (the message and "field" name the header, path
// part or body at fault), 409 stale_token, 413 too_large, 429 overloaded
// (more than MaxInFlight requests; Retry-After), 503 draining or
// unavailable (Retry-After), 507 full (MaxKeys reached: a new key is
// refused, existing keys still take writes).
//
// A 503 unavailable — the request waited RequestTimeout for the store's
// executor — is never half-done: a request that times out before the
// executor starts it is never submitted (realrt.Node.Do), and one it has
// started is answered. A disk that fails an fsync stops the process
// (filedisk panics rather than acknowledge what may not be durable); a
// restart on the same data directory finds every acknowledged write.
//
// Limits of this store, kept on purpose: it runs one write at a time, each
// with its own fsync (the simulated store syncs per write, and group
// commit would change its code); and its durable record is the whole table,
// rewritten on every write, so a write costs time in proportion to the
// number of keys — MaxKeys bounds it.
package storesvc
