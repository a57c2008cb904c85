package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/internal/testhooks"
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
	TestHooks      bool
	Unfenced       bool
	TokenKey       []byte
	API            svcmain.APIAuth
}

// settings are the command's flags and variables.
var settings = append(baseSettings, svcmain.ClientAuth("FENCESIM_STORE_", func(c *config) *svcmain.APIAuth { return &c.API })...)

var baseSettings = []svcmain.Setting[config]{
	svcmain.S("listen", "FENCESIM_STORE_LISTEN", "127.0.0.1:8090", "HTTP listen address, host:port (port 0: any free port)", func(c *config, v string) error {
		if err := svcmain.CheckHostPort(v, "127.0.0.1:8090 or :8090"); err != nil {
			return err
		}
		c.Listen = v
		return nil
	}),
	svcmain.S("data", "FENCESIM_STORE_DATA", "", "data directory (required; created if missing); one process at a time may hold it", func(c *config, v string) error {
		if v == "" {
			return errors.New("is required: the directory where T_max and values are fsynced, e.g. /var/lib/fencesim-store")
		}
		if fi, err := os.Stat(v); err == nil && !fi.IsDir() {
			return errors.New("exists and is not a directory")
		}
		c.DataDir = v
		return nil
	}),
	svcmain.S("max-keys", "FENCESIM_STORE_MAX_KEYS", "10000", "most keys the store holds; a new key past it gets 507 (1..1000000)", svcmain.IntIn(1, 1_000_000, func(c *config, n int) { c.MaxKeys = n })),
	svcmain.S("max-in-flight", "FENCESIM_STORE_MAX_IN_FLIGHT", "256", "most object requests served at once; more get 429 (1..65536)", svcmain.IntIn(1, 65536, func(c *config, n int) { c.MaxInFlight = n })),
	svcmain.S("request-timeout", "FENCESIM_STORE_REQUEST_TIMEOUT", "2s", "longest wait for the store; past it 503, not applied (1ms..1m)", svcmain.DurIn(time.Millisecond, time.Minute, func(c *config, d time.Duration) { c.RequestTimeout = d })),
	svcmain.S("drain-delay", "FENCESIM_STORE_DRAIN_DELAY", "0s", "on SIGTERM, how long to answer 503 before closing the listener (0..1m)", svcmain.DurIn(0, time.Minute, func(c *config, d time.Duration) { c.DrainDelay = d })),
	svcmain.S("drain-timeout", "FENCESIM_STORE_DRAIN_TIMEOUT", "10s", "on SIGTERM, the deadline for in-flight requests (1s..10m)", svcmain.DurIn(time.Second, 10*time.Minute, func(c *config, d time.Duration) { c.DrainTimeout = d })),
	svcmain.S("log-format", "FENCESIM_STORE_LOG_FORMAT", "text", "log format on stderr: text or json", func(c *config, v string) error {
		if v != "text" && v != "json" {
			return errors.New("must be text or json")
		}
		c.LogFormat = v
		return nil
	}),
	svcmain.TestHooks(func(c *config, on bool) { c.TestHooks = on }),
	svcmain.TokenKeyFile("FENCESIM_STORE_TOKEN_KEY_FILE", "with it a write needs the lock service's MAC of its token (else 403)", func(c *config, k []byte) { c.TokenKey = k }),
	svcmain.S("unfenced", "FENCESIM_STORE_UNFENCED", "false", "TEST ONLY (needs FENCESIM_TEST_HOOKS=1): true accepts every write and records its token, for live runs of lock services without fencing", svcmain.Bool(func(c *config, b bool) { c.Unfenced = b })),
}

// loadConfig reads every setting from args (flags), else env, else its
// default, and validates it. The error names the flag or variable, the
// value and what is allowed.
func loadConfig(args []string, env map[string]string, stderr io.Writer) (config, error) {
	c, err := svcmain.Load("fencesim-store", settings, args, env, stderr, usage)
	if err != nil {
		return config{}, err
	}
	if err := c.API.Check("FENCESIM_STORE_"); err != nil {
		return config{}, err
	}
	if c.Unfenced && !c.TestHooks {
		return config{}, fmt.Errorf("FENCESIM_STORE_UNFENCED=true (or -unfenced) needs %s=1: an unfenced store exists only for live test runs", testhooks.EnvVar)
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
	svcmain.Usage(w, settings, 31)
	fmt.Fprintf(w, "\nSIGTERM or SIGINT drains: /readyz turns 503, in-flight requests finish.\nExit codes: 0 drained, 1 failure, 2 bad configuration.\n")
}

func (c config) serviceConfig() storesvc.Config {
	return storesvc.Config{
		DataDir: c.DataDir, MaxKeys: c.MaxKeys, MaxInFlight: c.MaxInFlight,
		RequestTimeout: c.RequestTimeout, DrainDelay: c.DrainDelay,
		TestHooks: c.TestHooks, Unfenced: c.Unfenced, TokenKey: c.TokenKey, Authenticate: c.API.Authenticate(),
	}
}
