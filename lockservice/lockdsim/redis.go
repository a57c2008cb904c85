package lockdsim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	lua "github.com/yuin/gopher-lua"

	"github.com/fencesim/fencesim/lockd/scripts"
	"github.com/fencesim/fencesim/process"
)

// The Redis-like process: a key space of strings with expiry, scripted in
// Lua by EVAL, made durable by an append-only file on the node's disk.
//
// Inside its model: GET, SET (NX, XX, PX, EX), PEXPIRE, PTTL and DEL, called
// from scripts by redis.call and redis.pcall, with Redis's conversions
// between Lua and replies (numbers truncate to integers, false is nil, a
// table is an array up to its first nil, {err=…} is an error); a script
// runs atomically, with the clock read once at its start; keys expire by
// the node's wall clock (an absolute time in ms, as Redis keeps it), found
// on access or by a timer at the deadline (Redis's active expiry); every
// script's writes are one AOF record, appended after it runs and, with
// appendfsync always, synced before its reply — everysec syncs once a
// second, so a crash loses the last second of acknowledged writes; a torn
// last record is dropped at load (aof-load-truncated).
//
// Outside it: every other command, Redis's Lua sandbox beyond dropping the
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
type EvalReply struct {
	ID    uint64
	Value any
	Err   string
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
	return process.Mix(process.Mix(process.Mix(51, m.ID), hashValue(m.Value)), process.HashString(m.Err))
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

// entry is a key's value and its deadline (Unix ms by the wall clock, 0:
// none).
type entry struct {
	val string
	at  int64
}

// aofOp is one write in the append-only file.
type aofOp struct {
	Op  string `json:"op"` // "set" or "del"
	Key string `json:"k"`
	Val string `json:"v,omitempty"`
	At  int64  `json:"at,omitempty"`
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
	dirty   bool // everysec: writes not yet synced
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
			if op.Op == "set" {
				r.data[op.Key] = entry{val: op.Val, at: op.At}
			} else {
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

// Receive runs an Eval and answers it.
func (r *Redis) Receive(env process.Env, from process.NodeID, msg process.Message) {
	m, ok := msg.(Eval)
	if !ok {
		env.Log().Warn("redis.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
		return
	}
	r.env = env
	v, err := r.eval(m)
	r.commit()
	rep := EvalReply{ID: m.ID, Value: v}
	if err != nil {
		rep.Value, rep.Err = nil, err.Error()
	}
	env.Send(from, rep)
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
	r.writes, r.changes = r.writes[:0], r.changes[:0]
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
	r.writes = append(r.writes, aofOp{Op: "set", Key: key, Val: e.val, At: e.at})
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
