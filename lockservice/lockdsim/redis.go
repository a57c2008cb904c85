package lockdsim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	lua "github.com/yuin/gopher-lua"

	"github.com/fencesim/fencesim/lockd/scripts"
	"github.com/fencesim/fencesim/process"
)

// The Redis-like process: a key space of strings and sorted sets with
// expiry, scripted in Lua by EVAL, made durable by an append-only file on
// the node's disk, with pub/sub for lockd's wait queue.
//
// Inside its model: GET, SET (NX, XX, PX, EX), INCR, PEXPIRE, PTTL, DEL,
// EXISTS, TIME (the node's wall clock), the sorted-set commands the wait
// queue uses (ZADD without flags, ZREM, ZRANGE by index [WITHSCORES],
// ZRANGEBYSCORE [WITHSCORES], ZRANK, ZSCORE; members of equal score in
// byte order, an emptied set deleted) and PUBLISH, called
// from scripts by redis.call and redis.pcall, with Redis's conversions
// between Lua and replies (numbers truncate to integers, false is nil, a
// table is an array up to its first nil, {err=…} is an error); a script
// runs atomically, with the clock read once at its start; keys expire by
// the node's wall clock (an absolute time in ms, as Redis keeps it), found
// on access or by a timer at the deadline (Redis's active expiry); every
// script's writes are one AOF record, appended after it runs and, with
// appendfsync always, synced before its reply — everysec syncs once a
// second, so a crash loses the last second of acknowledged writes; a torn
// last record is dropped at load (aof-load-truncated). A node SUBSCRIBEs
// (Subscribe) to channels; a script's publications go out once its writes
// are as durable as the policy makes them, one Published message to each
// subscribed node. Subscriptions are the connection's: a restarted Redis
// has none (its replies carry a new Run, by which an instance knows to
// subscribe again), and a node's new session replaces its old one.
//
// Outside it: every other command (and options), Redis's Lua sandbox beyond dropping the
// file and print functions, replication, eviction, the script cache
// (EVALSHA is EVAL with the source), and AOF rewriting.

// Eval asks the Redis process to run a script: its Lua source with keys
// and arguments. ID is echoed in the reply.
type Eval struct {
	ID     uint64
	Script string
	Keys   []string
	Args   []string
}

// EvalReply answers an Eval: Value is the script's reply as a Redis client
// hands it over (int64, string, nil or []any of those), or Err its error.
// Run names the Redis process's run (a new one at every start): a client
// that sees it change knows its subscriptions are gone, as a real client
// knows from its connection breaking.
type EvalReply struct {
	ID    uint64
	Value any
	Err   string
	Run   uint64
}

// Subscribe subscribes the sending node's session to a channel. A session
// other than the node's current one replaces it (the node restarted: its
// old connection is gone).
type Subscribe struct {
	Channel string
	Session uint64
}

// Subscribed confirms a Subscribe, naming the Redis run it holds in.
type Subscribed struct {
	Channel      string
	Session, Run uint64
}

// Published is one publication to a subscribed session.
type Published struct {
	Channel, Payload string
	Session          uint64
}

// Fingerprint implements process.Message.
func (m Subscribe) Fingerprint() uint64 {
	return process.Mix(process.Mix(52, process.HashString(m.Channel)), m.Session)
}

// Fingerprint implements process.Message.
func (m Subscribed) Fingerprint() uint64 {
	return process.Mix(process.Mix(process.Mix(53, process.HashString(m.Channel)), m.Session), m.Run)
}

// Fingerprint implements process.Message.
func (m Published) Fingerprint() uint64 {
	return process.Mix(process.Mix(process.Mix(54, process.HashString(m.Channel)), process.HashString(m.Payload)), m.Session)
}

// String shows the script by name, not its source, in traces.
func (m Eval) String() string {
	return fmt.Sprintf("{ID:%d %s keys=%q args=%q}", m.ID, scripts.Name(m.Script), m.Keys, m.Args)
}

// Fingerprint implements process.Message.
func (m Eval) Fingerprint() uint64 {
	h := process.Mix(process.Mix(50, m.ID), process.HashString(m.Script))
	for _, k := range m.Keys {
		h = process.Mix(h, process.HashString(k))
	}
	for _, a := range m.Args {
		h = process.Mix(h, process.HashString(a))
	}
	return h
}

// Fingerprint implements process.Message.
func (m EvalReply) Fingerprint() uint64 {
	return process.Mix(process.Mix(process.Mix(process.Mix(51, m.ID), hashValue(m.Value)), process.HashString(m.Err)), m.Run)
}

func hashValue(v any) uint64 {
	switch v := v.(type) {
	case int64:
		return process.Mix(1, uint64(v))
	case string:
		return process.Mix(2, process.HashString(v))
	case []any:
		h := uint64(3)
		for _, e := range v {
			h = process.Mix(h, hashValue(e))
		}
		return h
	}
	return 0
}

// Fsync is the AOF's appendfsync policy.
type Fsync int

const (
	// FsyncAlways syncs every script's writes before its reply (what lockd
	// requires).
	FsyncAlways Fsync = iota
	// FsyncEverySec syncs once a second: a crash can lose acknowledged
	// writes, and with them fence tokens already handed out.
	FsyncEverySec
)

// Change is one change to the key space, as the Redis process tells its
// watcher: Op "set" (Value is the new value), "pexpire" (a new deadline),
// "del" or "expired" (Value was the value).
type Change struct {
	Op, Key, Value string
}

// RedisConfig configures a Redis process.
type RedisConfig struct {
	Fsync Fsync
	// Watch hears every change a script or an expiry made, once it is as
	// durable as the policy makes it (synced, with FsyncAlways), in the
	// order made. nil: nobody listens.
	Watch func(Change)
}

// entry is a key's value — a string, or a sorted set (z non-nil) — and
// its deadline (Unix ms by the wall clock, 0: none).
type entry struct {
	val string
	z   map[string]float64 // member → score
	at  int64
}

// zmember is a sorted set's member and score.
type zmember struct {
	M string  `json:"m"`
	S float64 `json:"s"`
}

// sorted is a sorted set's members in Redis's order: by score, then by
// member bytes.
func (e entry) sorted() []zmember {
	out := make([]zmember, 0, len(e.z))
	for m, sc := range e.z { //detlint:sorted
		out = append(out, zmember{m, sc})
	}
	slices.SortFunc(out, func(a, b zmember) int {
		if a.S != b.S {
			if a.S < b.S {
				return -1
			}
			return 1
		}
		return strings.Compare(a.M, b.M)
	})
	return out
}

// aofOp is one write in the append-only file: a key's whole new value.
type aofOp struct {
	Op  string    `json:"op"` // "set", "zset" or "del"
	Key string    `json:"k"`
	Val string    `json:"v,omitempty"`
	Z   []zmember `json:"z,omitempty"`
	At  int64     `json:"at,omitempty"`
}

const aofKey = "appendonly.aof"

// Redis is the simulated Redis: one process, one thread, scripts run one
// at a time to completion.
type Redis struct {
	cfg    RedisConfig
	data   map[string]entry
	timers map[string]clockwork.Timer
	L      *lua.LState
	protos map[string]*lua.FunctionProto
	env    process.Env
	// During a script: the clock reading it runs at, the writes it made
	// and the changes to tell.
	now     int64
	writes  []aofOp
	changes []Change
	pubs    []publication
	dirty   bool // everysec: writes not yet synced
	// run names this start (EvalReply.Run); subs are the sessions
	// subscribed since.
	run  uint64
	subs map[process.NodeID]*subscriber
}

// subscriber is a node's subscribed session.
type subscriber struct {
	session  uint64
	channels []string
}

// publication is one message a script published, sent after its commit.
type publication struct {
	to process.NodeID
	m  Published
}

// NewRedis returns a Redis process; every restart needs a new one.
func NewRedis(cfg RedisConfig) *Redis {
	return &Redis{cfg: cfg}
}

// Start loads the AOF and arms the expiry of every key in it.
func (r *Redis) Start(env process.Env) {
	r.env = env
	r.data, r.timers, r.protos = map[string]entry{}, map[string]clockwork.Timer{}, map[string]*lua.FunctionProto{}
	r.L = newLua(r)
	r.run, r.subs = env.Rand().Uint64()|1, map[process.NodeID]*subscriber{}
	r.load(env)
	keys := make([]string, 0, len(r.data))
	for k := range r.data { //detlint:sorted
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.arm(k)
	}
	if r.cfg.Fsync == FsyncEverySec {
		var tick func()
		tick = func() {
			if r.dirty {
				r.dirty = false
				env.Disk().Sync()
			}
			env.Clock().AfterFunc(time.Second, tick)
		}
		env.Clock().AfterFunc(time.Second, tick)
	}
	env.Log().LogAttrs(context.Background(), slog.LevelInfo, "redis.start", slog.Int("keys", len(keys)))
}

// load replays the AOF; a torn or unreadable tail is cut off.
func (r *Redis) load(env process.Env) {
	b, _ := env.Disk().Read(aofKey)
	good := 0
	for good < len(b) {
		nl := strings.IndexByte(string(b[good:]), '\n')
		if nl < 0 {
			break
		}
		var ops []aofOp
		if err := json.Unmarshal(b[good:good+nl], &ops); err != nil {
			break
		}
		for _, op := range ops {
			switch op.Op {
			case "set":
				r.data[op.Key] = entry{val: op.Val, at: op.At}
			case "zset":
				z := make(map[string]float64, len(op.Z))
				for _, m := range op.Z {
					z[m.M] = m.S
				}
				r.data[op.Key] = entry{z: z, at: op.At}
			default:
				delete(r.data, op.Key)
			}
		}
		good += nl + 1
	}
	if good < len(b) {
		env.Log().Warn("redis.aof-truncated", slog.Int("kept", good), slog.Int("dropped", len(b)-good))
		// Truncate, as redis-check-aof does: rewriting the good prefix
		// could be torn by a crash during its sync, losing synced writes.
		env.Disk().Truncate(aofKey, good)
		env.Disk().Sync()
	}
}

// Receive runs an Eval and answers it, or subscribes.
func (r *Redis) Receive(env process.Env, from process.NodeID, msg process.Message) {
	r.env = env
	switch m := msg.(type) {
	case Eval:
		v, err := r.eval(m)
		r.commit()
		rep := EvalReply{ID: m.ID, Value: v, Run: r.run}
		if err != nil {
			rep.Value, rep.Err = nil, err.Error()
		}
		env.Send(from, rep)
	case Subscribe:
		s := r.subs[from]
		if s == nil || s.session != m.Session {
			s = &subscriber{session: m.Session}
			r.subs[from] = s
		}
		if !slices.Contains(s.channels, m.Channel) {
			s.channels = append(s.channels, m.Channel)
		}
		env.Send(from, Subscribed{Channel: m.Channel, Session: m.Session, Run: r.run})
	default:
		env.Log().Warn("redis.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// publish is PUBLISH: the message goes to every session subscribed to
// channel, in node order, once the script commits; it returns how many.
func (r *Redis) publish(channel, payload string) int64 {
	nodes := make([]process.NodeID, 0, len(r.subs))
	for n, s := range r.subs { //detlint:sorted
		if slices.Contains(s.channels, channel) {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		r.pubs = append(r.pubs, publication{n, Published{Channel: channel, Payload: payload, Session: r.subs[n].session}})
	}
	return int64(len(nodes))
}

// commit writes the script's writes to the AOF as one record, syncs them
// as the policy says and tells the watcher.
func (r *Redis) commit() {
	if len(r.writes) > 0 {
		b, err := json.Marshal(r.writes)
		if err != nil {
			panic(fmt.Sprintf("lockdsim: encoding an AOF record: %v", err))
		}
		r.env.Disk().Append(aofKey, append(b, '\n'))
		if r.cfg.Fsync == FsyncAlways {
			r.env.Disk().Sync()
		} else {
			r.dirty = true
		}
	}
	if r.cfg.Watch != nil {
		for _, c := range r.changes {
			r.cfg.Watch(c)
		}
	}
	for _, p := range r.pubs {
		r.env.Send(p.to, p.m)
	}
	r.writes, r.changes, r.pubs = r.writes[:0], r.changes[:0], r.pubs[:0]
}

// clock is the node's wall clock in Unix ms.
func (r *Redis) clock() int64 { return r.env.Clock().Now().UnixMilli() }

// get returns key's entry, expiring it first if its deadline has passed.
func (r *Redis) get(key string) (entry, bool) {
	e, ok := r.data[key]
	if ok && e.at != 0 && r.now >= e.at {
		r.remove(key, "expired")
		return entry{}, false
	}
	return e, ok
}

func (r *Redis) set(key string, e entry) {
	r.data[key] = e
	if e.z != nil {
		r.writes = append(r.writes, aofOp{Op: "zset", Key: key, Z: e.sorted(), At: e.at})
	} else {
		r.writes = append(r.writes, aofOp{Op: "set", Key: key, Val: e.val, At: e.at})
	}
	r.arm(key)
}

func (r *Redis) remove(key, why string) {
	e := r.data[key]
	delete(r.data, key)
	r.disarm(key)
	r.writes = append(r.writes, aofOp{Op: "del", Key: key})
	r.changes = append(r.changes, Change{Op: why, Key: key, Value: e.val})
}

// arm (re)starts the timer that expires key at its deadline.
func (r *Redis) arm(key string) {
	r.disarm(key)
	e, ok := r.data[key]
	if !ok || e.at == 0 {
		return
	}
	d := time.Duration(e.at-r.clock()) * time.Millisecond
	r.timers[key] = r.env.Clock().AfterFunc(max(d, 0), func() {
		delete(r.timers, key)
		r.now = r.clock()
		if _, ok := r.get(key); ok {
			r.arm(key) // the wall clock went back: not yet
		}
		r.commit()
	})
}

func (r *Redis) disarm(key string) {
	if t, ok := r.timers[key]; ok {
		t.Stop()
		delete(r.timers, key)
	}
}

// Get returns key's value as a script would read it now (for tests).
func (r *Redis) Get(key string) (string, bool) {
	r.now = r.clock()
	e, ok := r.get(key)
	r.commit()
	return e.val, ok
}

// --- commands ---

// errReply is a Redis error reply.
type errReply string

func (e errReply) Error() string { return string(e) }

// status is a Redis status reply (+OK).
type status string

// command runs one Redis command for a script. The reply is nil, int64,
// string, status or []any; an error is an error reply.
func (r *Redis) command(args []string) (any, error) {
	if len(args) == 0 {
		return nil, errReply("ERR Please specify at least one argument for this redis lib call")
	}
	argc := func(n int) error {
		if len(args) != n {
			return errReply(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(args[0])))
		}
		return nil
	}
	switch strings.ToUpper(args[0]) {
	case "GET":
		if err := argc(2); err != nil {
			return nil, err
		}
		if e, ok := r.get(args[1]); ok {
			if e.z != nil {
				return nil, errWrongType
			}
			return e.val, nil
		}
		return nil, nil
	case "SET":
		return r.cmdSet(args)
	case "PEXPIRE":
		if err := argc(3); err != nil {
			return nil, err
		}
		ms, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return nil, errReply("ERR value is not an integer or out of range")
		}
		e, ok := r.get(args[1])
		if !ok {
			return int64(0), nil
		}
		if ms <= 0 {
			r.remove(args[1], "del")
			return int64(1), nil
		}
		e.at = r.now + ms
		r.set(args[1], e)
		r.changes = append(r.changes, Change{Op: "pexpire", Key: args[1], Value: e.val})
		return int64(1), nil
	case "INCR":
		if err := argc(2); err != nil {
			return nil, err
		}
		e, ok := r.get(args[1])
		if e.z != nil {
			return nil, errWrongType
		}
		n := int64(0)
		if ok {
			var err error
			if n, err = strconv.ParseInt(e.val, 10, 64); err != nil {
				return nil, errReply("ERR value is not an integer or out of range")
			}
		}
		if n == math.MaxInt64 {
			return nil, errReply("ERR increment or decrement would overflow")
		}
		e.val = strconv.FormatInt(n+1, 10)
		r.set(args[1], e)
		r.changes = append(r.changes, Change{Op: "set", Key: args[1], Value: e.val})
		return n + 1, nil
	case "EXISTS":
		if len(args) < 2 {
			return nil, argc(2)
		}
		n := int64(0)
		for _, k := range args[1:] {
			if _, ok := r.get(k); ok {
				n++
			}
		}
		return n, nil
	case "TIME":
		if err := argc(1); err != nil {
			return nil, err
		}
		return []any{strconv.FormatInt(r.now/1000, 10), strconv.FormatInt(r.now%1000*1000, 10)}, nil
	case "PUBLISH":
		if err := argc(3); err != nil {
			return nil, err
		}
		return r.publish(args[1], args[2]), nil
	case "ZADD", "ZREM", "ZRANGE", "ZRANGEBYSCORE", "ZRANK", "ZSCORE":
		return r.zcommand(args)
	case "PTTL":
		if err := argc(2); err != nil {
			return nil, err
		}
		e, ok := r.get(args[1])
		switch {
		case !ok:
			return int64(-2), nil
		case e.at == 0:
			return int64(-1), nil
		}
		return e.at - r.now, nil
	case "DEL":
		if len(args) < 2 {
			return nil, argc(2)
		}
		n := int64(0)
		for _, k := range args[1:] {
			if _, ok := r.get(k); ok {
				r.remove(k, "del")
				n++
			}
		}
		return n, nil
	}
	return nil, errReply(fmt.Sprintf("ERR unknown command '%s'", args[0]))
}

// errWrongType is Redis's reply to a command on a key of another type.
var errWrongType = errReply("WRONGTYPE Operation against a key holding the wrong kind of value")

// zcommand runs a sorted-set command.
func (r *Redis) zcommand(args []string) (any, error) {
	cmd := strings.ToUpper(args[0])
	arity := map[string]int{"ZADD": 4, "ZREM": 3, "ZRANGE": 4, "ZRANGEBYSCORE": 4, "ZRANK": 3, "ZSCORE": 3}[cmd]
	if len(args) < arity || (cmd == "ZRANK" || cmd == "ZSCORE") && len(args) != arity || cmd == "ZADD" && len(args)%2 != 0 {
		return nil, errReply(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(cmd)))
	}
	e, ok := r.get(args[1])
	if ok && e.z == nil {
		return nil, errWrongType
	}
	switch cmd {
	case "ZADD":
		if !ok {
			e = entry{z: map[string]float64{}}
		}
		for i := 2; i < len(args); i += 2 {
			if _, err := parseScore(args[i]); err != nil {
				return nil, err
			}
		}
		added := int64(0)
		for i := 2; i < len(args); i += 2 {
			sc, _ := parseScore(args[i])
			if _, in := e.z[args[i+1]]; !in {
				added++
			}
			e.z[args[i+1]] = sc
		}
		r.set(args[1], e)
		return added, nil
	case "ZREM":
		n := int64(0)
		for _, m := range args[2:] {
			if _, in := e.z[m]; in {
				delete(e.z, m)
				n++
			}
		}
		switch {
		case n > 0 && len(e.z) == 0:
			r.remove(args[1], "del")
		case n > 0:
			r.set(args[1], e)
		}
		return n, nil
	case "ZRANK":
		for i, m := range e.sorted() {
			if m.M == args[2] {
				return int64(i), nil
			}
		}
		return nil, nil
	case "ZSCORE":
		if sc, in := e.z[args[2]]; in {
			return formatScore(sc), nil
		}
		return nil, nil
	}
	withScores := false
	if len(args) > 4 {
		if len(args) != 5 || !strings.EqualFold(args[4], "WITHSCORES") {
			return nil, errReply("ERR syntax error")
		}
		withScores = true
	}
	all := e.sorted()
	var sel []zmember
	if cmd == "ZRANGE" {
		start, err1 := strconv.ParseInt(args[2], 10, 64)
		stop, err2 := strconv.ParseInt(args[3], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, errReply("ERR value is not an integer or out of range")
		}
		n := int64(len(all))
		if start < 0 {
			start = max(n+start, 0)
		}
		if stop < 0 {
			stop = n + stop
		}
		stop = min(stop, n-1)
		if start <= stop {
			sel = all[start : stop+1]
		}
	} else {
		lo, loEx, err1 := parseBound(args[2])
		hi, hiEx, err2 := parseBound(args[3])
		if err1 != nil || err2 != nil {
			return nil, errReply("ERR min or max is not a float")
		}
		for _, m := range all {
			if (m.S > lo || !loEx && m.S == lo) && (m.S < hi || !hiEx && m.S == hi) {
				sel = append(sel, m)
			}
		}
	}
	out := []any{}
	for _, m := range sel {
		out = append(out, m.M)
		if withScores {
			out = append(out, formatScore(m.S))
		}
	}
	return out, nil
}

// parseScore reads a ZADD score.
func parseScore(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, errReply("ERR value is not a valid float")
	}
	return f, nil
}

// parseBound reads a ZRANGEBYSCORE bound: a float, ±inf, or "(" and one
// (exclusive).
func parseBound(s string) (f float64, exclusive bool, err error) {
	if rest, ok := strings.CutPrefix(s, "("); ok {
		s, exclusive = rest, true
	}
	f, err = strconv.ParseFloat(s, 64)
	if err == nil && math.IsNaN(f) {
		err = errReply("nan")
	}
	return f, exclusive, err
}

// formatScore renders a score as Redis replies it: an integral one as an
// integer, any other with 17 significant digits.
func formatScore(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// cmdSet is SET key value [NX|XX] [PX ms|EX s].
func (r *Redis) cmdSet(args []string) (any, error) {
	if len(args) < 3 {
		return nil, errReply("ERR wrong number of arguments for 'set' command")
	}
	var nx, xx bool
	var at int64
	for i := 3; i < len(args); i++ {
		switch o := strings.ToUpper(args[i]); o {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "PX", "EX":
			if i+1 >= len(args) {
				return nil, errReply("ERR syntax error")
			}
			n, err := strconv.ParseInt(args[i+1], 10, 64)
			if err != nil {
				return nil, errReply("ERR value is not an integer or out of range")
			}
			if n <= 0 {
				return nil, errReply("ERR invalid expire time in 'set' command")
			}
			if o == "EX" {
				n *= 1000
			}
			at = r.now + n
			i++
		default:
			return nil, errReply("ERR syntax error")
		}
	}
	if nx && xx {
		return nil, errReply("ERR syntax error")
	}
	_, exists := r.get(args[1])
	if nx && exists || xx && !exists {
		return nil, nil
	}
	r.set(args[1], entry{val: args[2], at: at})
	r.changes = append(r.changes, Change{Op: "set", Key: args[1], Value: args[2]})
	return status("OK"), nil
}
