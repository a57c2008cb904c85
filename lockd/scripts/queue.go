package scripts

import (
	"strconv"
	"strings"
	"time"
)

// The wait queue. A waiting acquire (wait_ms > 0) joins its resource's
// queue in Redis, and a free lock is granted only to the queue's first
// live entry (or to anyone while the queue is empty): the queue lives in
// Redis, next to the lease, so that it orders the waiters of every
// instance sharing that Redis, not just one instance's. Keys, per
// resource R (in R's slot):
//
//	<prefix>{R}:queue     sorted set: "client requestID ttl_ms memory_ms"
//	                      per waiting request, scored by arrival (the last
//	                      score + 1)
//	<prefix>{R}:deadlines sorted set: the same members, scored by the
//	                      Redis-clock millisecond (TIME) past which the
//	                      entry is dead
//
// An entry is the request's, not the instance's: two copies of one request
// (its client retried on another instance while the first still waited)
// share one place in line, and one grant answers both (the request
// memory). An entry lives at most the queue lease past its last refresh (a
// waiting instance re-runs its acquire every quarter lease), and never past
// its wait, so an instance that died with waiters queued holds the line up
// for one lease at most: the next script that looks at the queue drops the
// dead entries. Both keys expire a lease after their last write, so a queue
// nobody waits in leaves nothing behind.
//
// A release hands the lock over: in the same script it grants the lease to
// the queue's live head (Acquire's own code, with the head's ttl, request
// memory and the releasing instance's fence) and PUBLISHes the grant,
// "R\n<member>\n<token> <ttl_ms> <time_ms>", on <prefix>wake, where the
// head's instance answers it without another round trip. A hand-over thus costs
// one script and one fsync, not two. The flip side: a head whose instance
// died less than a queue lease ago can be handed the lock, which then
// waits out that lease's ttl, as a grant whose reply was lost does. Where
// the script cannot grant (the head's request is already answered, the
// release had no fence), it publishes "R\n<member>", a wake, and the head's
// own acquire answers; so does a waiter leaving, or an acquire that drops
// a dead head, when the lock is free. A lost message (the subscription
// reconnecting) costs a waiter at most its refresh; a lease that simply
// expires (its holder died) publishes nothing, and the head asks again
// when the lease's time is up.
//
// Why pub/sub: it costs one connection per instance, needs no server
// configuration and works on miniredis (the embedded default). Keyspace
// notifications need notify-keyspace-events set on the server (miniredis
// has none) and would wake every waiter of a resource; a BLPOP hand-off
// would hold a pooled connection per waiter. Why the queue is in Redis and
// not in each instance: an instance's own FIFO orders only its own
// waiters, and the instances sharing a Redis would still race each other.
//
// The simulator's instances (lockservice/lockdsim) queue the same way,
// with these sources on the simulated Redis, so the hand-over is searched
// under the simulator's faults too.

// queueLib is the Lua the queue's scripts share: Acquire as a function of
// its keys and arguments, the Redis clock in ms and the queue's live head.
const queueLib = `
if redis.replicate_commands then redis.replicate_commands() end
local function acquire(KEYS, ARGV)
` + Acquire + `
end
local function qnow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function qout(q, d, m)
  redis.call('ZREM', q, m)
  redis.call('ZREM', d, m)
end
-- qhead drops the entries whose deadline passed and returns the first
-- live one (false if none) and how many it dropped.
local function qhead(q, d)
  local dead = redis.call('ZRANGEBYSCORE', d, '-inf', qnow())
  for _, m in ipairs(dead) do qout(q, d, m) end
  local h = redis.call('ZRANGE', q, 0, 0)
  return h[1] or false, #dead
end
local function qwake(chan, resource, h)
  redis.call('PUBLISH', chan, resource .. '\n' .. h)
end
-- qhand hands a free lock to the queue's live head h: Acquire with the
-- head's own ttl and request memory, fenced with the caller's fence, then
-- the grant published on the wake channel for the head's instance. A head
-- whose request is answered already (its memory holds the answer: a copy
-- granted outside the line) holds the line no more: it leaves, its
-- instance is woken (a waiting copy is answered from the memory) and the
-- next live head is tried. Where it cannot grant (no fence, the fence
-- refused) it publishes a wake, and the head's own acquire answers. It
-- stops, handing nothing, at the caller's own entry me (''), which the
-- caller grants itself. Returns whether it handed the lock, and the head
-- it stopped at (false: the line is empty).
local function qhand(lock, fence, epochKey, seqKey, q, d, h, epoch, seen, chan, resource, me)
  while h and h ~= me do
    local c, r, ttl, mem = string.match(h, '^(%S+) (%S+) (%d+) (%d+)$')
    if not c or epoch == '' then break end
    local mk = string.sub(lock, 1, -5) .. 'req:' .. c .. ' ' .. r
    if mem ~= '0' and redis.call('EXISTS', mk) == 1 then
      qout(q, d, h)
      qwake(chan, resource, h)
      h = qhead(q, d)
    else
      local g = acquire({lock, fence, mk, epochKey, seqKey}, {c, r, ttl, mem, epoch, seen})
      if g[1] == 1 and g[3] > 0 then
        qout(q, d, h)
        redis.call('PUBLISH', chan, resource .. '\n' .. h .. '\n' .. g[2] .. ' ' .. g[3] .. ' ' .. qnow())
        return true, h
      end
      break
    end
  end
  if h and h ~= me then qwake(chan, resource, h) end
  return false, h
end
`

// QueuedAcquire is Acquire behind the wait queue. A request the lease or
// the request memory already answers (a retry of a granted request, one
// handed the lock by a release, a late copy) is answered as Acquire
// answers it, and leaves the queue. Otherwise a free lock is granted only
// if the queue's live head is this request or the queue is empty; else it
// is handed to the head there and then (qhand, as a release hands it) and
// the answer is held by the head, which holds the lease now: a held
// answer names a holder. Heads whose requests are answered already leave
// the line on the way (qhand), and if that brings this request to the
// front, or empties the line, it is granted. Only where the head cannot
// be handed it (no fence, or the fence refused) is the answer held by the
// head's client with the lock free ({0, head's client, 0, 0, place,
// time}), and the head is woken. A held request with a queue lease
// (ARGV[7] > 0, a waiting acquire) joins the queue's tail, or keeps its
// place and refreshes its deadline; one without (wait 0) is answered
// without queueing, and never jumps the line. A grant leaves the queue.
//
// KEYS: Acquire's five (WithFence), queue, deadlines. ARGV: Acquire's six,
// queue lease ms (0: not waiting), wait left ms, wake channel, resource.
//
// Reply: Acquire's, and when held two more elements: the request's place
// in line (1: next; 0: not queued) and the Redis clock's ms (TIME), which
// a grant handed over later is timed against (ParseHandOver).
const QueuedAcquire = queueLib + `
local q, d = KEYS[6], KEYS[7]
local me = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4]
local lease = tonumber(ARGV[7])
local v = redis.call('GET', KEYS[1])
local mine = false
if v then
  local c, r = string.match(v, '^(%S+) (%S+) %d+$')
  mine = c == ARGV[1] and r == ARGV[2]
end
if mine or (ARGV[4] ~= '0' and redis.call('GET', KEYS[3])) then
  qout(q, d, me)
  return acquire(KEYS, ARGV)
end
local h, dropped = qhead(q, d)
if not v and (not h or h == me) then
  local res = acquire(KEYS, ARGV)
  if res[1] == 1 then qout(q, d, me) end
  return res
end
local res
if v then
  res = acquire(KEYS, ARGV)
  if res[1] ~= 0 then return res end
else
  local handed, nh = qhand(KEYS[1], KEYS[2], KEYS[4], KEYS[5], q, d, h, ARGV[5], ARGV[6], ARGV[9], ARGV[10], me)
  if handed or not nh or nh == me then
    -- Free, and the line's: the head was handed it now, as a release
    -- hands it, so the held answer names a client that holds the lease
    -- (a lock kept free for a head would answer held with no holder);
    -- or the heads before this request were answered already and left,
    -- and it is this request's turn.
    res = acquire(KEYS, ARGV)
    if res[1] == 1 then qout(q, d, me) end
    if res[1] ~= 0 then return res end
  else
    res = {0, string.match(nh, '^(%S+)') or '', 0, 0}
  end
end
local place = 0
if lease > 0 then
  local dl = qnow() + math.max(1, math.min(lease, tonumber(ARGV[8])))
  if not redis.call('ZSCORE', q, me) then
    local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
    redis.call('ZADD', q, tonumber(last[2] or '0') + 1, me)
  end
  redis.call('ZADD', d, dl, me)
  redis.call('PEXPIRE', q, lease)
  redis.call('PEXPIRE', d, lease)
  place = redis.call('ZRANK', q, me) + 1
end
res[5] = place
res[6] = qnow()
return res
`

// QueuedRelease is Release, handing the lock over to the queue's live head
// when it leaves it free with someone in line (with the releasing
// instance's fence; without one, ARGV[7] empty, it only wakes the head).
//
// KEYS: Release's two, queue, deadlines, fence, epoch, grant sequence.
// ARGV: Release's four, wake channel, resource, epoch, grant sequence seen.
// Reply: Release's.
const QueuedRelease = queueLib + `
local function release()
` + Release + `
end
local res = release()
if res == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  local h = qhead(KEYS[3], KEYS[4])
  if h then
    qhand(KEYS[1], KEYS[5], KEYS[6], KEYS[7], KEYS[3], KEYS[4], h, ARGV[7], ARGV[8], ARGV[5], ARGV[6], '')
  end
end
return res
`

// Leave takes a waiter that gives up (its wait passed, its request was
// cancelled) out of the queue, and wakes the next if the lock is free. A
// lock handed to it meanwhile stays granted (another copy of the request
// may have answered it): its lease runs out, as one whose reply was lost.
//
// KEYS: lock, queue, deadlines. ARGV: member, wake channel, resource.
// Reply: 1.
const Leave = queueLib + `
qout(KEYS[2], KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local h = qhead(KEYS[2], KEYS[3])
  if h then qwake(ARGV[2], ARGV[3], h) end
end
return 1
`

// QueueLease is how long a queue entry lives past its last refresh, by
// default.
const QueueLease = 2 * time.Second

// Queue names a namespace's wait queues: the keys' prefix and the wake
// channel.
type Queue struct{ Prefix string }

// Channel is the namespace's wake channel.
func (q Queue) Channel() string { return q.Prefix + "wake" }

// Member is an acquire call's entry in its resource's queue (as the
// scripts build it from the call's arguments).
func Member(c Call) string { return strings.Join(c.Args[:4], " ") }

// Wake is the key of the messages for member waiting for resource: a
// wake, or a grant, which adds "\n<token> <ttl_ms> <time_ms>"
// (ParseHandOver).
func Wake(resource, member string) string { return resource + "\n" + member }

// SplitWake splits a message of the wake channel into its key (Wake) and
// what follows it ("" for a wake, "<token> <ttl_ms> <time_ms>" for a
// grant).
func SplitWake(msg string) (key, rest string) {
	i := strings.IndexByte(msg, '\n')
	if i < 0 {
		return msg, ""
	}
	if j := strings.IndexByte(msg[i+1:], '\n'); j >= 0 {
		return msg[:i+1+j], msg[i+2+j:]
	}
	return msg, ""
}

// HandOver is a grant a release handed over.
type HandOver struct {
	Token uint64
	TTL   time.Duration
	// At is when it was granted, in ms of the Redis clock (TIME).
	At int64
}

// ParseHandOver reads a grant's "<token> <ttl_ms> <time_ms>"; ok is false
// for anything else (a wake).
func ParseHandOver(rest string) (h HandOver, ok bool) {
	f := strings.Fields(rest)
	if len(f) != 3 {
		return HandOver{}, false
	}
	tok, err1 := strconv.ParseUint(f[0], 10, 64)
	ttl, err2 := strconv.ParseInt(f[1], 10, 64)
	at, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || tok == 0 || ttl <= 0 {
		return HandOver{}, false
	}
	return HandOver{Token: tok, TTL: time.Duration(ttl) * time.Millisecond, At: at}, true
}

func (q Queue) keys(resource string) (queue, deadlines string) {
	k := KeysOf(q.Prefix, resource).prefix
	return k + "queue", k + "deadlines"
}

// Acquire puts an acquire call (WithFence'd) behind the queue: lease is the
// entry's lease (0: the request does not wait, and is not queued), left
// the wait's time left.
func (q Queue) Acquire(c Call, resource string, lease, left time.Duration) Call {
	if len(c.Keys) != 5 {
		panic("scripts: Queue.Acquire of a call without its fence (WithFence)")
	}
	qk, dk := q.keys(resource)
	c.Script = QueuedAcquire
	c.Keys = append(c.Keys[:5:5], qk, dk)
	c.Args = append(c.Args[:6:6], ms(lease), ms(left), q.Channel(), resource)
	return c
}

// Release is a release call that hands the lock over to the queue's head,
// granting it with the fence given (epoch "": it only wakes the head).
func (q Queue) Release(c Call, resource, epochKey, seqKey, epoch string, seq uint64) Call {
	qk, dk := q.keys(resource)
	c.Script = QueuedRelease
	c.Keys = append(c.Keys[:2:2], qk, dk, KeysOf(q.Prefix, resource).Fence, epochKey, seqKey)
	c.Args = append(c.Args[:4:4], q.Channel(), resource, epoch, strconv.FormatUint(seq, 10))
	return c
}

// Leave is member's leaving resource's queue.
func (q Queue) Leave(resource, member string) Call {
	qk, dk := q.keys(resource)
	return Call{Script: Leave, Keys: []string{KeysOf(q.Prefix, resource).Lock, qk, dk},
		Args: []string{member, q.Channel(), resource}}
}
