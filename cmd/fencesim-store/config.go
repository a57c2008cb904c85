package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/storesvc"
)

// config is the command's configuration, read at boot from flags, then the
// environment, then the defaults, each value validated.
type config struct {
	Listen         string
	DataDir        string
	MaxKeys        int
	MaxInFlight    int
	RequestTimeout time.Duration
	DrainDelay     time.Duration
	DrainTimeout   time.Duration
	LogFormat      string
}

// setting is one configurable value: its flag, its variable, its default
// and what it accepts. set validates a value and stores it.
type setting struct {
	flag, env, def, help string
	set                  func(c *config, v string) error
}

var settings = []setting{
	{"listen", "FENCESIM_STORE_LISTEN", "127.0.0.1:8090", "HTTP listen address, host:port (port 0: any free port)", func(c *config, v string) error {
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			return errors.New("must be host:port, e.g. 127.0.0.1:8090 or :8090")
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return errors.New("the port must be a number in 0..65535")
		}
		if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
			return errors.New("the host must be an IP address or a host name")
		}
		c.Listen = v
		return nil
	}},
	{"data", "FENCESIM_STORE_DATA", "", "data directory (required; created if missing); one process at a time may hold it", func(c *config, v string) error {
		if v == "" {
			return errors.New("is required: the directory where T_max and values are fsynced, e.g. /var/lib/fencesim-store")
		}
		if fi, err := os.Stat(v); err == nil && !fi.IsDir() {
			return errors.New("exists and is not a directory")
		}
		c.DataDir = v
		return nil
	}},
	{"max-keys", "FENCESIM_STORE_MAX_KEYS", "10000", "most keys the store holds; a new key past it gets 507 (1..1000000)", intIn(1, 1_000_000, func(c *config, n int) { c.MaxKeys = n })},
	{"max-in-flight", "FENCESIM_STORE_MAX_IN_FLIGHT", "256", "most object requests served at once; more get 429 (1..65536)", intIn(1, 65536, func(c *config, n int) { c.MaxInFlight = n })},
	{"request-timeout", "FENCESIM_STORE_REQUEST_TIMEOUT", "2s", "longest wait for the store; past it 503, not applied (1ms..1m)", durIn(time.Millisecond, time.Minute, func(c *config, d time.Duration) { c.RequestTimeout = d })},
	{"drain-delay", "FENCESIM_STORE_DRAIN_DELAY", "0s", "on SIGTERM, how long to answer 503 before closing the listener (0..1m)", durIn(0, time.Minute, func(c *config, d time.Duration) { c.DrainDelay = d })},
	{"drain-timeout", "FENCESIM_STORE_DRAIN_TIMEOUT", "10s", "on SIGTERM, the deadline for in-flight requests (1s..10m)", durIn(time.Second, 10*time.Minute, func(c *config, d time.Duration) { c.DrainTimeout = d })},
	{"log-format", "FENCESIM_STORE_LOG_FORMAT", "text", "log format on stderr: text or json", func(c *config, v string) error {
		if v != "text" && v != "json" {
			return errors.New("must be text or json")
		}
		c.LogFormat = v
		return nil
	}},
}

func intIn(lo, hi int, set func(*config, int)) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in %d..%d", lo, hi)
		}
		set(c, n)
		return nil
	}
}

func durIn(lo, hi time.Duration, set func(*config, time.Duration)) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < lo || d > hi {
			return fmt.Errorf("must be a duration in %v..%v, such as 500ms or 2s", lo, hi)
		}
		set(c, d)
		return nil
	}
}

func validHostname(h string) bool {
	for _, part := range strings.Split(h, ".") {
		if part == "" || len(part) > 63 {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return len(h) <= 253
}

// errHelp is -h: usage was printed, exit 0.
var errHelp = errors.New("help requested")

// loadConfig reads every setting from args (flags), else env, else its
// default, and validates it. The error names the flag or variable, the
// value and what is allowed.
func loadConfig(args []string, env map[string]string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("fencesim-store", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vals := make([]*string, len(settings))
	for i, s := range settings {
		vals[i] = fs.String(s.flag, "", s.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stderr)
			return config{}, errHelp
		}
		return config{}, fmt.Errorf("%v (fencesim-store -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (fencesim-store -h lists the flags)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var c config
	for i, s := range settings {
		v, src := s.def, "default"
		if ev, ok := env[s.env]; ok {
			v, src = ev, s.env
		}
		if given[s.flag] {
			v, src = *vals[i], "-"+s.flag
		}
		if err := s.set(&c, v); err != nil {
			if src == "default" {
				src = s.env + " (or -" + s.flag + ")"
				return config{}, fmt.Errorf("%s %v", src, err)
			}
			return config{}, fmt.Errorf("%s=%q: %v", src, v, err)
		}
	}
	// Created only once everything is valid: a rejected configuration
	// leaves nothing behind.
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return config{}, fmt.Errorf("the data directory (FENCESIM_STORE_DATA or -data) %q cannot be created: %v", c.DataDir, err)
	}
	return c, nil
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `fencesim-store: the fenced store as an HTTP service.

  PUT /v1/objects/{key}  header Fencing-Token: <uint64>, body: a decimal int64
                         → 200 accepted, 409 stale (T_max in the body and Fencing-Token-Max)
  GET /v1/objects/{key}  → value, token of its write, T_max
  GET /healthz /readyz /metrics

Each setting is a flag or an environment variable (the flag wins):

`)
	for _, s := range settings {
		def := s.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(w, "  -%-16s %-31s default %s\n      %s\n", s.flag, s.env, def, s.help)
	}
	fmt.Fprintf(w, "\nSIGTERM or SIGINT drains: /readyz turns 503, in-flight requests finish.\nExit codes: 0 drained, 1 failure, 2 bad configuration.\n")
}

func (c config) serviceConfig() storesvc.Config {
	return storesvc.Config{
		DataDir: c.DataDir, MaxKeys: c.MaxKeys, MaxInFlight: c.MaxInFlight,
		RequestTimeout: c.RequestTimeout, DrainDelay: c.DrainDelay,
	}
}
