// Package lockapi is fencesim's HTTP lock API: the wire format, a server
// generic over a small Backend interface, and the admission control in
// front of it. fencesim-lockd serves it over Redis (package lockd); the Raft
// replica can serve the same API by implementing Backend.
//
// Routes (Go 1.22 patterns):
//
//	POST /v1/locks/{resource}/acquire  {"client","ttl_ms","request_id"} → 200 {"token","ttl_ms"}
//	POST /v1/locks/{resource}/renew    {"client","token","ttl_ms"}      → 200 {"token","ttl_ms"}
//	POST /v1/locks/{resource}/release  {"client","token"}               → 200 {"released":true}
//	GET  /v1/locks/{resource}                                           → 200 {"held",...}
//	GET  /healthz  /readyz  /metrics
//
// Errors are {"error": code, "message", ...}: 400 invalid (the message and
// "field" name the offending field), 409 held (acquire: "holder",
// "retry_after_ms") or not_holder (renew/release), 413 body too large, 429
// overloaded (shed at admission, Retry-After), 503 draining or backend
// unavailable (Retry-After; the service fails closed: no grant without the
// backend's answer), 307 not_leader (Location names the leader's URL).
//
// Tokens are uint64 end to end and travel as decimal strings in JSON
// ("token":"18446744073709551615"): a JavaScript client parsing a JSON
// number would silently round anything above 2^53. A token sent as a JSON
// number is rejected (400), so such a client cannot send a rounded token
// back and have it compared.
package lockapi
