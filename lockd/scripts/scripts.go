// Package scripts is the one definition of lockd's atomic operations: the
// Lua source of each script, the keys and arguments each takes, and how
// each reply reads. Both worlds run exactly this: the real lockd sends the
// sources to a real Redis (EVALSHA, EVAL fallback), and the simulator's
// Redis-like process (lockservice/lockdsim) runs the same sources in an
// embedded Lua interpreter on the simulated clock. The package holds no
// Redis client and no clock, so the simulation may import it.
//
// Keys, per resource R (the braces are a Redis Cluster hash tag, so every
// key of a resource lives in one slot and one script may touch them all):
//
//	<prefix>{R}:lock      "client requestID token", with PX = the lease
//	<prefix>{R}:fence     the last token issued, a decimal string, never expires
//	<prefix>{R}:released  "client token requestID" of the last release made
//	                      with a request id, for a minute: its retry answers released
//	<prefix>{R}:req:<client> <requestID>
//	                      the token an acquire's request id was granted, kept
//	                      Memory past the lease (renewals push it on): a copy of
//	                      that request run later — queued in a paused instance
//	                      while its client retried elsewhere, was granted and
//	                      released — answers that grant again, ended, instead
//	                      of granting the request a second time
//
// and the wait queue's two, <prefix>{R}:queue and <prefix>{R}:deadlines
// (see Queue).
package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Acquire grants the lease with SET NX PX and issues the next fence token
// in the same atomic step. The counter is incremented as a decimal string
// rather than with INCR: Redis hands integers to Lua as doubles, so INCR's
// reply would round above 2^53, and INCR stops at 2^63−1 while tokens are
// uint64. A retry with the same client and request id while the lease is
// held returns the same token and re-arms the lease (it is the same request
// arriving again, not a second holder); one that comes after the lease
// ended, while the request is remembered (KEYS[3], ARGV[4] ms past the
// lease; "0" remembers nothing), answers the grant it had with no time
// left.
//
// KEYS: lock, fence, request memory[, epoch, grant sequence]. ARGV:
// client, request id, ttl ms, memory ms[, epoch, grant sequence seen].
//
// With the fence's arguments (Call.WithFence: lockd's, and the simulated
// instances'), before anything the script checks the namespace's epoch
// (KEYS[4], "<id> <floor>") against the one the instance knows (ARGV[5]),
// and the
// namespace's grant sequence (KEYS[5], bumped at each grant) against the
// highest the instance saw (ARGV[6]): a Redis that lost its data
// (restarted without AOF, flushed) has no epoch, and one that rewound
// (failed over to a stale replica) has an older sequence, and either way
// the script refuses with FENCE_LOST and writes nothing, so no token is
// ever issued twice. A resource with no counter starts at the epoch's
// floor (0 unless an operator re-initialised the namespace above every
// token issued before). Without them (tests' calls) there is no
// epoch and the sequence is 0.
//
// Reply: {1, token, ttl_ms, seq} granted (ttl 0: granted earlier, ended
// since) · {0, holder, pttl, seq} held · error on a lost fence, a corrupt
// counter or an exhausted one (2^64−1 issued).
const Acquire = `
local fenced = ARGV[5] ~= nil and ARGV[5] ~= ''
local e = false
local seq = 0
if fenced then
  e = redis.call('GET', KEYS[4])
  if e ~= ARGV[5] then
    return redis.error_reply('FENCE_LOST epoch ' .. tostring(e) .. ', expected ' .. ARGV[5])
  end
  seq = tonumber(redis.call('GET', KEYS[5]) or '0')
  if seq < tonumber(ARGV[6]) then
    return redis.error_reply('FENCE_LOST grant sequence ' .. seq .. ' below ' .. ARGV[6] .. ' seen before')
  end
end
local v = redis.call('GET', KEYS[1])
local c, r, t
if v then
  c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
  if c == ARGV[1] and r == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    if ARGV[4] ~= '0' then
      redis.call('SET', KEYS[3], t, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
    end
    return {1, t, tonumber(ARGV[3]), seq}
  end
end
if ARGV[4] ~= '0' then
  local g = redis.call('GET', KEYS[3])
  if g == 'held' then return {0, '', 0, seq} end
  if g then return {1, g, 0, seq} end
end
if v then
  return {0, c or '', redis.call('PTTL', KEYS[1]), seq}
end
local f = redis.call('GET', KEYS[2])
if not f then f = (e and string.match(e, ' (%d+)$')) or '0' end
if not string.match(f, '^%d+$') then
  return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not a decimal string')
end
local i = #f
t = nil
while i > 0 do
  local d = string.byte(f, i) - 48
  if d < 9 then
    t = string.sub(f, 1, i - 1) .. string.char(d + 49) .. string.rep('0', #f - i)
    break
  end
  i = i - 1
end
if not t then t = '1' .. string.rep('0', #f) end
if #t > 20 or (#t == 20 and t > '18446744073709551615') then
  return redis.error_reply('fence counter ' .. KEYS[2] .. ' exhausted (2^64-1 tokens issued)')
end
redis.call('SET', KEYS[2], t)
if fenced then
  seq = redis.call('INCR', KEYS[5])
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t, 'NX', 'PX', ARGV[3])
if ARGV[4] ~= '0' then
  redis.call('SET', KEYS[3], t, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
end
return {1, t, tonumber(ARGV[3]), seq}
`

// Renew re-arms the lease if client holds it with token, and pushes the
// memory of the request that acquired it on past the new end (ARGV[4] ms;
// "0" remembers nothing). The memory key is KEYS[1]'s resource's, named
// from the lease's request id, so it is in KEYS[1]'s slot. 1 or 0.
//
// KEYS: lock. ARGV: client, token, ttl ms, memory ms.
const Renew = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
if c ~= ARGV[1] or t ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[4] ~= '0' then
  redis.call('SET', string.sub(KEYS[1], 1, -5) .. 'req:' .. c .. ' ' .. r, t, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
end
return 1
`

// Release deletes the lease if client holds it with token. 1 or 0. A
// release with a request id (ARGV[3]) leaves "client token requestID" in
// KEYS[2] for ARGV[4] ms, so that a retry of it — its reply lost — answers
// 1 again instead of 0.
//
// KEYS: lock, released. ARGV: client, token, request id, kept ms.
const Release = `
local v = redis.call('GET', KEYS[1])
local c, r, t
if v then c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$') end
if not v or c ~= ARGV[1] or t ~= ARGV[2] then
  if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) == ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] then
    return 1
  end
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[4])
end
return 1
`

// Held settles a request as held, once its instance gives up waiting: it
// remembers the request as answered held (for ARGV[1] ms), so that a late
// copy of it — duplicated on the wire, queued in a paused instance —
// answers held too instead of granting a lock nobody waits for. If a copy
// was granted meanwhile, it returns that grant's token instead: the
// request's answer is that grant (ended, or soon to be).
//
// KEYS: request memory. ARGV: memory ms. Reply: 0 held · token granted.
const Held = `
local g = redis.call('GET', KEYS[1])
if g and g ~= 'held' then return g end
redis.call('SET', KEYS[1], 'held', 'PX', ARGV[1])
return 0
`

// Get reads a resource's lease and counter at one instant:
// {lease value or ”, pttl, last token or '0'}.
//
// KEYS: lock, fence.
const Get = `
local v = redis.call('GET', KEYS[1])
local f = redis.call('GET', KEYS[2])
return {v or '', redis.call('PTTL', KEYS[1]), f or '0'}
`

// Name names a script source for logs and traces ("acquire", …), or
// "script" for one not of this package.
func Name(src string) string {
	switch src {
	case Acquire:
		return "acquire"
	case Renew:
		return "renew"
	case Release:
		return "release"
	case Held:
		return "held"
	case Get:
		return "get"
	case QueuedAcquire:
		return "queued acquire"
	case QueuedRelease:
		return "queued release"
	case Leave:
		return "leave"
	}
	return "script"
}

// ReleasedFor is how long a release's request id is kept for its retries.
const ReleasedFor = time.Minute

// Memory is how long an acquire's request id is kept past its lease (the
// lease's end pushed on by every renewal): a copy of the request that runs
// within it answers the grant it had; one that runs later is granted
// anew. It bounds how long a request may sit queued (a paused instance, a
// slow network) and still be recognised.
const Memory = time.Minute

// Keys are one resource's keys.
type Keys struct {
	Lock, Fence, Released string
	prefix                string // <prefix>{R}:
}

// KeysOf returns resource's keys under prefix.
func KeysOf(prefix, resource string) Keys {
	k := prefix + "{" + resource + "}:"
	return Keys{Lock: k + "lock", Fence: k + "fence", Released: k + "released", prefix: k}
}

// Request is the memory key of client's acquire with requestID.
func (k Keys) Request(client, requestID string) string {
	return k.prefix + "req:" + client + " " + requestID
}

// ResourceOf returns the resource whose lease key is key under prefix,
// and whether key is one.
func ResourceOf(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+"{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}:lock")
}

// Call is one script run: its source, keys and arguments.
type Call struct {
	Script string
	Keys   []string
	Args   []string
}

// ms renders a duration as Redis takes it: whole milliseconds.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// memoryArg is the memory argument: "0" (remember nothing) without a
// request id, or when memory is not positive.
func memoryArg(requestID string, memory time.Duration) string {
	if requestID == "" || memory <= 0 {
		return "0"
	}
	return ms(memory)
}

// AcquireCall is client's acquire of resource with requestID for ttl,
// remembering the request memory past its lease (0: not at all).
func AcquireCall(prefix, resource, client, requestID string, ttl, memory time.Duration) Call {
	k := KeysOf(prefix, resource)
	return Call{Script: Acquire, Keys: []string{k.Lock, k.Fence, k.Request(client, requestID)},
		Args: []string{client, requestID, ms(ttl), memoryArg(requestID, memory)}}
}

// WithFence adds the real lockd's fence to an acquire (see Acquire): the
// namespace's epoch and grant-sequence keys, the epoch the instance knows
// and the highest grant sequence it saw.
func (c Call) WithFence(epochKey, seqKey, epoch string, seq uint64) Call {
	c.Keys = append(c.Keys[:len(c.Keys):len(c.Keys)], epochKey, seqKey)
	c.Args = append(c.Args[:len(c.Args):len(c.Args)], epoch, strconv.FormatUint(seq, 10))
	return c
}

// HeldCall settles client's acquire of resource with requestID as held
// (Held); ok is false when nothing is remembered (no request id, or
// memory off), and the answer stands as it is.
func HeldCall(prefix, resource, client, requestID string, memory time.Duration) (c Call, ok bool) {
	m := memoryArg(requestID, memory)
	if m == "0" {
		return Call{}, false
	}
	return Call{Script: Held, Keys: []string{KeysOf(prefix, resource).Request(client, requestID)}, Args: []string{m}}, true
}

// ParseHeld reads a Held script's reply: the token a copy of the request
// was granted, or 0 if it stays held.
func ParseHeld(res any) (uint64, error) {
	switch v := res.(type) {
	case int64:
		return 0, nil
	case string:
		tok, err := strconv.ParseUint(v, 10, 64)
		if err != nil || tok == 0 {
			return 0, fmt.Errorf("lockd: held script returned token %q", v)
		}
		return tok, nil
	}
	return 0, fmt.Errorf("lockd: held script replied %v", res)
}

// RenewCall is client's renewal of token on resource for ttl.
func RenewCall(prefix, resource, client string, token uint64, ttl, memory time.Duration) Call {
	return Call{Script: Renew, Keys: []string{KeysOf(prefix, resource).Lock},
		Args: []string{client, strconv.FormatUint(token, 10), ms(ttl), memoryArg("-", memory)}}
}

// ReleaseCall is client's release of token on resource with requestID
// ("" for none).
func ReleaseCall(prefix, resource, client string, token uint64, requestID string) Call {
	k := KeysOf(prefix, resource)
	return Call{Script: Release, Keys: []string{k.Lock, k.Released},
		Args: []string{client, strconv.FormatUint(token, 10), requestID, ms(ReleasedFor)}}
}

// GetCall reads resource's lease and counter.
func GetCall(prefix, resource string) Call {
	k := KeysOf(prefix, resource)
	return Call{Script: Get, Keys: []string{k.Lock, k.Fence}}
}

// Acquired is an acquire script's reply.
type Acquired struct {
	Granted bool
	Token   uint64        // Granted
	TTL     time.Duration // Granted: the lease's length (0: it ended since)
	Holder  string        // held: the holder's client name
	Left    time.Duration // held: the lease's time left
	// Seq is the namespace's grant sequence the script saw (bumped by a
	// grant): 0 without the fence (Call.WithFence).
	Seq uint64
	// Place is a held request's place in its resource's wait queue (1:
	// next; 0: not queued), and Now the Redis clock's ms when it was
	// answered: QueuedAcquire's fifth and sixth elements.
	Place int
	Now   int64
}

// ParseAcquire reads an acquire script's reply, as a Redis client hands it
// over: integers as int64, strings as string.
func ParseAcquire(res []any) (Acquired, error) {
	if len(res) != 4 && len(res) != 6 {
		return Acquired{}, fmt.Errorf("lockd: acquire script replied %v", res)
	}
	ms, _ := res[2].(int64)
	seq, _ := res[3].(int64)
	if granted, _ := res[0].(int64); granted == 0 {
		holder, _ := res[1].(string)
		var place, now int64
		if len(res) == 6 {
			place, _ = res[4].(int64)
			now, _ = res[5].(int64)
		}
		return Acquired{Holder: holder, Left: time.Duration(max(ms, 0)) * time.Millisecond, Seq: uint64(max(seq, 0)), Place: int(max(place, 0)), Now: now}, nil
	}
	ts, _ := res[1].(string)
	tok, err := strconv.ParseUint(ts, 10, 64)
	if err != nil || tok == 0 {
		return Acquired{}, fmt.Errorf("lockd: acquire script returned token %q", ts)
	}
	return Acquired{Granted: true, Token: tok, TTL: time.Duration(max(ms, 0)) * time.Millisecond, Seq: uint64(max(seq, 0))}, nil
}

// State is a get script's reply.
type State struct {
	Held      bool
	Holder    string
	Token     uint64
	TTL       time.Duration
	LastToken uint64
}

// ParseGet reads a get script's reply.
func ParseGet(res []any) (State, error) {
	if len(res) != 3 {
		return State{}, fmt.Errorf("lockd: get script replied %v", res)
	}
	var st State
	fs, _ := res[2].(string)
	st.LastToken, _ = strconv.ParseUint(fs, 10, 64)
	v, _ := res[0].(string)
	if v == "" {
		return st, nil
	}
	f := strings.Split(v, " ")
	if len(f) != 3 {
		return st, fmt.Errorf("lockd: corrupt lease value %q", v)
	}
	st.Held, st.Holder = true, f[0]
	st.Token, _ = strconv.ParseUint(f[2], 10, 64)
	ms, _ := res[1].(int64)
	st.TTL = time.Duration(max(ms, 0)) * time.Millisecond
	return st, nil
}

// Lease is a lease key's value: its holder, the request id that acquired
// it and its token.
type Lease struct {
	Client, RequestID string
	Token             uint64
}

// ParseLease reads a lease key's value.
func ParseLease(v string) (Lease, bool) {
	f := strings.Split(v, " ")
	if len(f) != 3 {
		return Lease{}, false
	}
	tok, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return Lease{}, false
	}
	return Lease{Client: f[0], RequestID: f[1], Token: tok}, true
}
