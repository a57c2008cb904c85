package lockdsim

import (
	"fmt"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// newLua returns the interpreter the Redis process runs scripts in: the
// base, table, string and math libraries (math without random and
// randomseed: their numbers are not the seed's; no io, os or package),
// without the functions that reach files or standard output, and the
// redis table (call, pcall, error_reply, status_reply). The scripts lockd
// runs iterate tables only with ipairs, so no map order of the interpreter
// reaches their result.
func newLua(r *Redis) *lua.LState {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, f := range []string{"dofile", "loadfile", "load", "loadstring", "print", "collectgarbage", "module", "require"} {
		L.SetGlobal(f, lua.LNil)
	}
	if m, ok := L.GetGlobal("math").(*lua.LTable); ok {
		m.RawSetString("random", lua.LNil)
		m.RawSetString("randomseed", lua.LNil)
	}
	red := L.NewTable()
	L.SetField(red, "call", L.NewFunction(func(L *lua.LState) int { return r.luaCall(L, false) }))
	L.SetField(red, "pcall", L.NewFunction(func(L *lua.LState) int { return r.luaCall(L, true) }))
	L.SetField(red, "error_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		L.SetField(t, "err", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetField(red, "status_reply", L.NewFunction(func(L *lua.LState) int {
		t := L.NewTable()
		L.SetField(t, "ok", lua.LString(L.CheckString(1)))
		L.Push(t)
		return 1
	}))
	L.SetGlobal("redis", red)
	return L
}

// eval runs one script to completion, with the clock read once at its
// start, and returns its reply converted as Redis converts it.
func (r *Redis) eval(m Eval) (any, error) {
	r.now = r.clock()
	proto, ok := r.protos[m.Script]
	if !ok {
		var err error
		if proto, err = compile(m.Script); err != nil {
			return nil, errReply("ERR Error compiling script: " + err.Error())
		}
		r.protos[m.Script] = proto
	}
	L := r.L
	L.SetGlobal("KEYS", strings2table(L, m.Keys))
	L.SetGlobal("ARGV", strings2table(L, m.Args))
	L.Push(L.NewFunctionFromProto(proto))
	if err := L.PCall(0, 1, nil); err != nil {
		msg := err.Error()
		if ae, ok := err.(*lua.ApiError); ok {
			msg = ae.Object.String()
		}
		if strings.HasPrefix(msg, "ERR ") || strings.HasPrefix(msg, "WRONGTYPE") {
			return nil, errReply(msg)
		}
		return nil, errReply("ERR Error running script: " + msg)
	}
	v := L.Get(-1)
	L.Pop(1)
	return fromLua(v)
}

// compile compiles a script once; its byte code is shared by every run.
func compile(src string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(src), "script")
	if err != nil {
		return nil, err
	}
	return lua.Compile(chunk, "script")
}

func strings2table(L *lua.LState, ss []string) *lua.LTable {
	t := L.CreateTable(len(ss), 0)
	for _, s := range ss {
		t.Append(lua.LString(s))
	}
	return t
}

// luaCall is redis.call (protected: redis.pcall): the arguments as
// strings (numbers as Lua prints them), the reply converted to Lua. An
// error reply raises it (call) or returns it as {err=…} (pcall).
func (r *Redis) luaCall(L *lua.LState, protected bool) int {
	n := L.GetTop()
	args := make([]string, n)
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = string(v)
		case lua.LNumber:
			args[i-1] = v.String()
		default:
			L.RaiseError("ERR Lua redis lib command arguments must be strings or integers")
			return 0
		}
	}
	v, err := r.command(args)
	if err != nil {
		if protected {
			t := L.NewTable()
			L.SetField(t, "err", lua.LString(err.Error()))
			L.Push(t)
			return 1
		}
		L.RaiseError("%s", err.Error())
		return 0
	}
	L.Push(toLua(L, v))
	return 1
}

// toLua converts a command's reply as Redis does: nil → false, integer →
// number, bulk → string, status → {ok=…}, array → table.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LFalse
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case status:
		t := L.NewTable()
		L.SetField(t, "ok", lua.LString(string(v)))
		return t
	case []any:
		t := L.CreateTable(len(v), 0)
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	}
	panic(fmt.Sprintf("lockdsim: reply of type %T", v))
}

// fromLua converts a script's result to a reply as Redis does: number →
// integer (truncated), string → bulk, true → 1, false and nil → nil,
// {err=…} → error, {ok=…} → status, other tables → array up to the first
// nil.
func fromLua(v lua.LValue) (any, error) {
	switch v := v.(type) {
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return int64(0), nil
		}
		return int64(f), nil
	case lua.LString:
		return string(v), nil
	case lua.LBool:
		if v {
			return int64(1), nil
		}
		return nil, nil
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return nil, errReply(string(e))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return string(s), nil
		}
		var out []any
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			x, err := fromLua(e)
			if err != nil {
				x = err.Error()
			}
			out = append(out, x)
		}
		return out, nil
	}
	return nil, nil
}
