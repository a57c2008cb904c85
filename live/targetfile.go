package live

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// TargetFile is a target described in a JSON file (simrun live
// -target-file): a lock service in any language, its server processes'
// commands and environment with placeholders the harness fills for each
// run, their ready checks, which of them are replicas, and the client —
// fencesim's HTTP lock API (the shipped Go client, fencesim-liveclient)
// or a command of the user's own that speaks the JSON-lines protocol of
// package liveclient. docs/live-targets.md is its reference.
//
// Placeholders, in commands, env values, ready checks and endpoints:
//
//	{addr:NAME}    a free loopback host:port, the same for one NAME in a run
//	{port:NAME}    its port
//	{link:NAME}    the address of NAME as the server being laid out dials
//	               it: through the fault proxy of its link to the server
//	               that owns NAME ("redis" or "n2.raft" is owned by server
//	               redis or n2), so network faults cut that link
//	{dir:NAME}     a data directory kept across restarts ("{dir}": the
//	               server's own, named after it)
//	{here}         the directory of the target file
//	{bin:NAME}     the executable NAME, from simrun live -bin or $PATH
//	{peers}        the server's "peers" template expanded for each
//	               replica, {i} (its index from 0) and {name} set, joined
//	               by the template's separator
type TargetFile struct {
	Name string `json:"name"`
	Doc  string `json:"doc,omitempty"`
	// Fenced, TokensPerResource, ClockFaults, DiskFaults: as TargetInfo.
	Fenced            bool         `json:"fenced"`
	TokensPerResource bool         `json:"tokens_per_resource,omitempty"`
	ClockFaults       bool         `json:"clock_faults,omitempty"`
	DiskFaults        bool         `json:"disk_faults,omitempty"`
	Servers           []FileServer `json:"servers"`
	Client            FileClient   `json:"client"`
	// Leader, "lock_api": the replica that answers a lock request (GET)
	// without a redirect leads, for faults aimed at @leader; "": none.
	Leader string `json:"leader,omitempty"`
	// Options are the -opt keys the target takes (passed to the client).
	Options []string `json:"options,omitempty"`

	dir string // the file's directory: {here}
}

// FileServer is one server process of a target file.
type FileServer struct {
	Name    string            `json:"name"`
	Replica bool              `json:"replica,omitempty"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// Ready is the ready check: exactly one of its fields.
	Ready FileReady `json:"ready"`
	// Endpoint is the client-facing URL (http://…) or host:port; "":
	// clients do not talk to it.
	Endpoint string `json:"endpoint,omitempty"`
	// Hooks is the base URL of fencesim's test hooks (/test/clock,
	// /test/disk) if the server serves them.
	Hooks string `json:"hooks,omitempty"`
	// Peers is the template {peers} expands for each replica.
	Peers *FilePeers `json:"peers,omitempty"`
	// UnproxiedPeers: as Server.UnproxiedPeers.
	UnproxiedPeers bool `json:"unproxied_peers,omitempty"`
	// StopSignal: "TERM" (default) or "KILL".
	StopSignal string `json:"stop_signal,omitempty"`
}

// FileReady is a server's ready check.
type FileReady struct {
	HTTP  string `json:"http,omitempty"`  // GET answers 200
	TCP   string `json:"tcp,omitempty"`   // host:port accepts a connection
	Redis string `json:"redis,omitempty"` // host:port answers PING with PONG
}

// FilePeers is a peer-list template.
type FilePeers struct {
	Each string `json:"each"`
	Sep  string `json:"sep,omitempty"` // default ","
}

// FileClient is the client program: LockAPI, or Command.
type FileClient struct {
	// LockAPI: the service speaks fencesim's HTTP lock API (docs/
	// lock-api.yaml); the harness runs the shipped Go client,
	// fencesim-liveclient, against the servers' endpoints.
	LockAPI bool `json:"lock_api,omitempty"`
	// Command is a client of the user's own: it speaks the JSON-lines
	// protocol of package liveclient on stdin/stdout and takes -client,
	// -endpoints, -store, -op-timeout and -opt k=v (docs/live-targets.md).
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// LoadTargetFile reads and checks a target file.
func LoadTargetFile(path string) (*TargetFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := parseTargetFile(b, filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("target file %s: %v", path, err)
	}
	return f, nil
}

// parseTargetFile reads a target file's JSON strictly; dir is what
// {here} stands for.
func parseTargetFile(b []byte, dir string) (*TargetFile, error) {
	var f TargetFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	f.dir = dir
	if err := f.check(); err != nil {
		return nil, err
	}
	return &f, nil
}

var placeholder = regexp.MustCompile(`\{([a-z]+)(?::([^{}]*))?\}`)

func (f *TargetFile) check() error {
	if !validName.MatchString(f.Name) {
		return fmt.Errorf("name %q must be [A-Za-z0-9._-], at most 64", f.Name)
	}
	if len(f.Servers) == 0 {
		return fmt.Errorf("servers: none")
	}
	if f.Client.LockAPI == (len(f.Client.Command) > 0) {
		return fmt.Errorf("client: give either \"lock_api\": true or a \"command\"")
	}
	if f.Leader != "" && f.Leader != "lock_api" {
		return fmt.Errorf("leader %q: \"lock_api\" or nothing", f.Leader)
	}
	seen := map[string]bool{"store": true}
	endpoints := 0
	for i, s := range f.Servers {
		what := fmt.Sprintf("servers[%d] (%s)", i, s.Name)
		switch {
		case !validName.MatchString(s.Name) || seen[s.Name]:
			return fmt.Errorf("%s: name must be [A-Za-z0-9._-], at most 64, unique and not \"store\"", what)
		case len(s.Command) == 0:
			return fmt.Errorf("%s: command is empty", what)
		case countSet(s.Ready.HTTP, s.Ready.TCP, s.Ready.Redis) != 1:
			return fmt.Errorf("%s: ready needs exactly one of http, tcp, redis", what)
		case s.StopSignal != "" && s.StopSignal != "TERM" && s.StopSignal != "KILL":
			return fmt.Errorf("%s: stop_signal %q: TERM or KILL", what, s.StopSignal)
		}
		seen[s.Name] = true
		if s.Endpoint != "" {
			endpoints++
		}
		if err := checkPlaceholders(what, s.fields(), s.Peers != nil); err != nil {
			return err
		}
	}
	if endpoints == 0 {
		return fmt.Errorf("no server has an endpoint for the clients")
	}
	client := slices.Clone(f.Client.Command)
	for _, v := range f.Client.Env {
		client = append(client, v)
	}
	return checkPlaceholders("client", client, false)
}

// checkPlaceholders refuses an unknown placeholder, one without the name
// it needs, and {peers} where there is no template.
func checkPlaceholders(what string, values []string, peers bool) error {
	for _, v := range values {
		for _, m := range placeholder.FindAllStringSubmatch(v, -1) {
			switch m[1] {
			case "addr", "port", "link", "bin":
				if m[2] == "" {
					return fmt.Errorf("%s: %s needs a name: {%s:NAME}", what, m[0], m[1])
				}
			case "dir", "here", "peers", "i", "name":
			default:
				return fmt.Errorf("%s: unknown placeholder %s (known: addr, port, link, dir, here, bin, peers)", what, m[0])
			}
			if m[1] == "peers" && !peers {
				return fmt.Errorf("%s: {peers} without a peers template", what)
			}
		}
	}
	return nil
}

func countSet(v ...string) int {
	n := 0
	for _, s := range v {
		if s != "" {
			n++
		}
	}
	return n
}

func (s FileServer) fields() []string {
	out := append([]string{s.Ready.HTTP, s.Ready.TCP, s.Ready.Redis, s.Endpoint, s.Hooks}, s.Command...)
	for _, v := range s.Env {
		out = append(out, v)
	}
	if s.Peers != nil {
		out = append(out, s.Peers.Each)
	}
	return out
}

// Info is the file's TargetInfo.
func (f *TargetFile) Info() TargetInfo {
	info := TargetInfo{Name: f.Name, Doc: f.Doc, Fenced: f.Fenced, TokensPerResource: f.TokensPerResource,
		ClockFaults: f.ClockFaults, DiskFaults: f.DiskFaults, Options: f.Options}
	if f.Doc == "" {
		info.Doc = "the target described in " + filepath.Join(f.dir, f.Name)
	}
	// The executables it names: each command's first word and {bin:…}.
	bin := func(argv []string) {
		for i, a := range argv {
			for _, m := range placeholder.FindAllStringSubmatch(a, -1) {
				if m[1] == "bin" && !slices.Contains(info.Binaries, m[2]) {
					info.Binaries = append(info.Binaries, m[2])
				}
			}
			if i == 0 && !strings.ContainsAny(a, "/{") && !slices.Contains(info.Binaries, a) {
				info.Binaries = append(info.Binaries, a)
			}
		}
	}
	for _, s := range f.Servers {
		info.Servers = append(info.Servers, s.Name)
		bin(s.Command)
	}
	info.Binaries = append(info.Binaries, "fencesim-store")
	if f.Client.LockAPI {
		info.Binaries = append(info.Binaries, "fencesim-liveclient")
	}
	bin(f.Client.Command)
	return info
}

// expander fills one run's placeholders.
type expander struct {
	f     *TargetFile
	s     *Setup
	addrs map[string]string
}

func (e *expander) addr(name string) (string, error) {
	if a, ok := e.addrs[name]; ok {
		return a, nil
	}
	a, err := e.s.Free()
	if err != nil {
		return "", err
	}
	e.addrs[name] = a
	return a, nil
}

// owner is the server that owns an address name: "n2.raft" → n2.
func owner(name string) string {
	o, _, _ := strings.Cut(name, ".")
	return o
}

// expand fills v's placeholders for server self (index i among the
// replicas, for a peers template; -1 elsewhere).
func (e *expander) expand(v, self string) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(v, func(m string) string {
		if err != nil {
			return ""
		}
		p := placeholder.FindStringSubmatch(m)
		kind, arg := p[1], p[2]
		var r string
		switch kind {
		case "addr":
			r, err = e.addr(arg)
		case "port":
			var a string
			if a, err = e.addr(arg); err == nil {
				_, r, _ = net.SplitHostPort(a)
			}
		case "link":
			var a string
			if a, err = e.addr(arg); err == nil {
				if to := owner(arg); to == self || self == "" {
					r = a
				} else {
					r, err = e.s.Link(self, to, a)
				}
			}
		case "dir":
			if arg == "" {
				arg = self
			}
			r, err = e.s.Dir(arg)
		case "here":
			r = e.f.dir
		case "bin":
			r, err = e.s.Bin(arg)
		case "peers":
			r, err = e.peers(self)
		default:
			r = m // {i}, {name}: filled by peers
		}
		return r
	})
	return out, err
}

// peers expands self's peers template for every replica.
func (e *expander) peers(self string) (string, error) {
	var srv FileServer
	for _, s := range e.f.Servers {
		if s.Name == self {
			srv = s
		}
	}
	sep := srv.Peers.Sep
	if sep == "" {
		sep = ","
	}
	var parts []string
	i := 0
	for _, s := range e.f.Servers {
		if !s.Replica {
			continue
		}
		t := strings.NewReplacer("{i}", strconv.Itoa(i), "{name}", s.Name).Replace(srv.Peers.Each)
		v, err := e.expand(t, self)
		if err != nil {
			return "", err
		}
		parts = append(parts, v)
		i++
	}
	return strings.Join(parts, sep), nil
}

// Layout lays out the file's servers for one run.
func (f *TargetFile) Layout(s *Setup) (Layout, error) {
	e := &expander{f: f, s: s, addrs: map[string]string{}}
	var l Layout
	for _, fs := range f.Servers {
		srv := Server{Name: fs.Name, Replica: fs.Replica, UnproxiedPeers: fs.UnproxiedPeers}
		if fs.StopSignal == "KILL" {
			srv.StopSignal = syscall.SIGKILL
		}
		for i, a := range fs.Command {
			v, err := e.expand(a, fs.Name)
			if err != nil {
				return Layout{}, fmt.Errorf("server %s: %w", fs.Name, err)
			}
			if i == 0 && !strings.Contains(v, "/") {
				if v, err = s.Bin(v); err != nil {
					return Layout{}, fmt.Errorf("server %s: %w", fs.Name, err)
				}
			}
			srv.Argv = append(srv.Argv, v)
		}
		keys := make([]string, 0, len(fs.Env))
		for k := range fs.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := e.expand(fs.Env[k], fs.Name)
			if err != nil {
				return Layout{}, fmt.Errorf("server %s: env %s: %w", fs.Name, k, err)
			}
			srv.Env = append(srv.Env, k+"="+v)
		}
		var err error
		for _, p := range []struct {
			dst *string
			src string
		}{{&srv.Endpoint, fs.Endpoint}, {&srv.TestURL, fs.Hooks}, {&srv.ReadyURL, fs.Ready.HTTP}} {
			if *p.dst, err = e.expand(p.src, ""); err != nil {
				return Layout{}, fmt.Errorf("server %s: %w", fs.Name, err)
			}
		}
		switch {
		case fs.Ready.TCP != "":
			addr, err := e.expand(fs.Ready.TCP, "")
			if err != nil {
				return Layout{}, err
			}
			srv.Ready = func(ctx context.Context) error {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					c.Close()
				}
				return err
			}
		case fs.Ready.Redis != "":
			addr, err := e.expand(fs.Ready.Redis, "")
			if err != nil {
				return Layout{}, err
			}
			srv.Ready = func(ctx context.Context) error { return redisPing(ctx, addr) }
		}
		if dir, ok := e.dirOf(fs.Name); ok {
			srv.Dir = dir
		}
		l.Servers = append(l.Servers, srv)
	}
	if f.Client.LockAPI {
		bin, err := s.Bin("fencesim-liveclient")
		if err != nil {
			return Layout{}, err
		}
		l.Client = ClientProgram{Argv: []string{bin}}
	} else {
		for i, a := range f.Client.Command {
			v, err := e.expand(a, "")
			if err != nil {
				return Layout{}, fmt.Errorf("client: %w", err)
			}
			if i == 0 && !strings.Contains(v, "/") {
				if v, err = s.Bin(v); err != nil {
					return Layout{}, fmt.Errorf("client: %w", err)
				}
			}
			l.Client.Argv = append(l.Client.Argv, v)
		}
		for k, v := range f.Client.Env {
			v, err := e.expand(v, "")
			if err != nil {
				return Layout{}, fmt.Errorf("client: env %s: %w", k, err)
			}
			l.Client.Env = append(l.Client.Env, k+"="+v)
		}
		slices.Sort(l.Client.Env)
	}
	if f.Leader == "lock_api" {
		l.Leader = func(ctx context.Context) (string, bool) {
			var reps []Server
			for _, s := range l.Servers {
				if s.Replica && s.Endpoint != "" {
					reps = append(reps, s)
				}
			}
			return apiLeader(ctx, reps)
		}
	}
	return l, nil
}

// dirOf is the data directory a server's placeholders made under its own
// name, if any.
func (e *expander) dirOf(name string) (string, bool) {
	d := filepath.Join(e.s.dir, "data", name)
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return d, true
	}
	return "", false
}
