package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/fencesim/fencesim/internal/clientauth"
	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/lockapi"
)

// config is fencesim-lockd's whole configuration, from the environment
// only (12-factor: the same image runs everywhere). Every variable has a
// default and an allowed range; help is what -h prints.
//
// Parsed with github.com/caarlos0/env/v11: struct tags with defaults,
// typed time.Duration parsing, every error at once (an AggregateError),
// no dependencies of its own, and it is maintained. envconfig would do
// too but is frozen since 2019 and stops at the first error. Ranges and
// cross-field rules are checked here, in validate, since neither library
// expresses them.
type config struct {
	Listen         string        `env:"FENCESIM_LISTEN" envDefault:"127.0.0.1:7070" help:"host:port to serve the lock API on (port 0: any free port)"`
	RedisAddr      string        `env:"FENCESIM_REDIS_ADDR" envDefault:"" help:"Redis host:port shared by every instance; empty: an embedded in-memory Redis (miniredis), NOT durable and not shared, for tests and quick starts only"`
	RedisPassword  string        `env:"FENCESIM_REDIS_PASSWORD" envDefault:"" help:"Redis AUTH password (never logged)"`
	RedisDB        int           `env:"FENCESIM_REDIS_DB" envDefault:"0" help:"Redis database number, 0..15"`
	RedisPoolSize  int           `env:"FENCESIM_REDIS_POOL_SIZE" envDefault:"64" help:"Redis connections per instance, 1..10000; a request that finds none free within the Redis timeout is shed as overload"`
	RedisPipelines int           `env:"FENCESIM_REDIS_PIPELINES" envDefault:"4" help:"pipelines of script calls out at once, 0..64: calls made while another is out queue for one and go together (a write and a read for many, one fsync at Redis); a call alone goes at once; 0: every call on a connection of its own"`
	RedisTimeout   time.Duration `env:"FENCESIM_REDIS_TIMEOUT" envDefault:"500ms" help:"dial/read/write timeout per Redis call, 10ms..30s"`
	KeyPrefix      string        `env:"FENCESIM_KEY_PREFIX" envDefault:"fencesim:" help:"prefix of every Redis key, 1..64 of [A-Za-z0-9._:-]"`
	RequireDurable bool          `env:"FENCESIM_REQUIRE_DURABLE" envDefault:"false" help:"refuse to start unless Redis runs appendonly yes + appendfsync always (fence tokens survive a Redis restart), stop granting (503, /readyz) whenever a later check finds it otherwise, and grant only over a namespace initialised before (FENCESIM_REDIS_INIT), so that a Redis that lost its data is refused by every instance"`
	RedisInit      bool          `env:"FENCESIM_REDIS_INIT" envDefault:"false" help:"create the namespace's fence epoch if Redis has none (a new deployment, or a re-initialisation after a loss with FENCESIM_TOKEN_FLOOR); without FENCESIM_REQUIRE_DURABLE an instance always may"`
	TokenFloor     uint64        `env:"FENCESIM_TOKEN_FLOOR" envDefault:"0" help:"with FENCESIM_REDIS_INIT, where the new epoch's fence counters start: above every token issued before (after a loss: the highest token your fenced resources accepted)"`
	TTLMin         time.Duration `env:"FENCESIM_TTL_MIN" envDefault:"100ms" help:"shortest lease a client may ask for, 1ms..1h"`
	TTLMax         time.Duration `env:"FENCESIM_TTL_MAX" envDefault:"5m" help:"longest lease a client may ask for, FENCESIM_TTL_MIN..24h"`
	Admission      string        `env:"FENCESIM_ADMISSION" envDefault:"gradient" help:"how the concurrency limit adapts: gradient (follows the ratio of long- to short-term latency, no target to set), aimd (shrinks when a request exceeds FENCESIM_LATENCY_TARGET) or static (FENCESIM_MAX_INFLIGHT always)"`
	MaxInFlight    int           `env:"FENCESIM_MAX_INFLIGHT" envDefault:"256" help:"upper bound of the adaptive concurrency limit (where it starts), 1..100000; requests over the limit get 429 at once"`
	MinInFlight    int           `env:"FENCESIM_MIN_INFLIGHT" envDefault:"0" help:"lower bound of the adaptive concurrency limit, 1..FENCESIM_MAX_INFLIGHT (equal: a static limit); 0: FENCESIM_REDIS_POOL_SIZE (at most FENCESIM_MAX_INFLIGHT), what the instance can have in Redis at once"`
	LatencyTarget  time.Duration `env:"FENCESIM_LATENCY_TARGET" envDefault:"50ms" help:"aimd only: request latency above which the concurrency limit shrinks, 1ms..10s"`
	MaxBodyBytes   int64         `env:"FENCESIM_MAX_BODY_BYTES" envDefault:"4096" help:"largest request body, 512..1048576; larger gets 413"`
	RetryAfter     time.Duration `env:"FENCESIM_RETRY_AFTER" envDefault:"100ms" help:"retry hint sent with 429/503, 1ms..1m"`
	DrainDelay     time.Duration `env:"FENCESIM_DRAIN_DELAY" envDefault:"0s" help:"on SIGTERM, time /readyz answers 503 before the listener closes (let the load balancer notice), 0..FENCESIM_DRAIN_TIMEOUT"`
	DrainTimeout   time.Duration `env:"FENCESIM_DRAIN_TIMEOUT" envDefault:"10s" help:"on SIGTERM, time allowed for the delay plus in-flight requests before connections are cut, 0..10m"`
	LogFormat      string        `env:"FENCESIM_LOG_FORMAT" envDefault:"text" help:"text or json"`
	TokenKeyFile   string        `env:"FENCESIM_TOKEN_KEY_FILE" envDefault:"" help:"file of the fencing key shared with the fenced store (>=32 bytes, mode 600): every grant carries a MAC of its token (token_mac) that fencesim-store checks; empty: tokens are not signed"`
	ClientTokens   string        `env:"FENCESIM_CLIENT_TOKENS_FILE" envDefault:"" help:"file of the API's clients, one \"<identity> <token>\" a line (mode 600; reloaded on SIGHUP): a request needs Authorization: Bearer <token> and acts only under its identity; empty: clients are not authenticated"`
	APICertFile    string        `env:"FENCESIM_API_CERT_FILE" envDefault:"" help:"PEM certificate (chain) of the API's TLS, with FENCESIM_API_KEY_FILE (reloaded on SIGHUP); empty: plain HTTP"`
	APIKeyFile     string        `env:"FENCESIM_API_KEY_FILE" envDefault:"" help:"PEM private key of the API's TLS certificate"`
	TestHooks      string        `env:"FENCESIM_TEST_HOOKS" envDefault:"0" help:"TEST ONLY, never in a deployment: 1 serves POST /test/clock (skews this instance's own clock: its admission windows; leases live on Redis's clock) for live fault-injection runs"`
}

// configError names the variable, the value and what is allowed.
type configError struct{ problems []string }

func (e *configError) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.problems, "\n  ") + "\n(fencesim-lockd -h lists every variable)"
}

// loadConfig parses and validates the environment given as a map.
func loadConfig(environ map[string]string) (config, error) {
	var c config
	errs := &configError{}
	vars := varNames()
	for k := range environ {
		if strings.HasPrefix(k, "FENCESIM_") && !vars[k] {
			errs.problems = append(errs.problems, fmt.Sprintf("%s: unknown variable (a typo?)", k))
		}
	}
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return c, err
		}
		for _, e := range agg.Errors {
			var pe env.ParseError
			if errors.As(e, &pe) {
				v := fieldVar(pe.Name)
				errs.problems = append(errs.problems, fmt.Sprintf("%s=%q: %s", v, environ[v], typeHint(pe.Type)))
			} else {
				errs.problems = append(errs.problems, e.Error())
			}
		}
	}
	if len(errs.problems) == 0 {
		errs.problems = c.validate()
	}
	sort.Strings(errs.problems)
	if len(errs.problems) > 0 {
		return c, errs
	}
	return c, nil
}

func typeHint(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(time.Duration(0)):
		return "not a duration; write e.g. 250ms, 2s, 5m"
	case reflect.TypeOf(false):
		return "not a boolean; write true or false"
	default:
		return "not a " + t.String()
	}
}

// validate checks ranges and cross-field rules, one message per problem.
func (c config) validate() []string {
	var p []string
	bad := func(v string, val any, allowed string) {
		p = append(p, fmt.Sprintf("%s=%v: %s", v, val, allowed))
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		bad("FENCESIM_LISTEN", c.Listen, "must be host:port, e.g. 127.0.0.1:7070 or :7070")
	}
	if c.RedisAddr != "" {
		if _, port, err := net.SplitHostPort(c.RedisAddr); err != nil || port == "" {
			bad("FENCESIM_REDIS_ADDR", c.RedisAddr, "must be host:port, e.g. 10.0.0.5:6379, or empty for the embedded Redis")
		}
	}
	if c.RedisDB < 0 || c.RedisDB > 15 {
		bad("FENCESIM_REDIS_DB", c.RedisDB, "must be 0..15")
	}
	if c.RedisPoolSize < 1 || c.RedisPoolSize > 10000 {
		bad("FENCESIM_REDIS_POOL_SIZE", c.RedisPoolSize, "must be 1..10000")
	}
	if c.RedisPipelines < 0 || c.RedisPipelines > 64 {
		bad("FENCESIM_REDIS_PIPELINES", c.RedisPipelines, "must be 0..64 (0: no pipelining)")
	}
	if c.RedisTimeout < 10*time.Millisecond || c.RedisTimeout > 30*time.Second {
		bad("FENCESIM_REDIS_TIMEOUT", c.RedisTimeout, "must be 10ms..30s")
	}
	if len(c.KeyPrefix) == 0 || len(c.KeyPrefix) > 64 || strings.Trim(c.KeyPrefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") != "" {
		bad("FENCESIM_KEY_PREFIX", c.KeyPrefix, "must be 1..64 characters of [A-Za-z0-9._:-]")
	}
	if c.TTLMin < time.Millisecond || c.TTLMin > time.Hour {
		bad("FENCESIM_TTL_MIN", c.TTLMin, "must be 1ms..1h")
	}
	if c.TTLMax < c.TTLMin || c.TTLMax > 24*time.Hour {
		bad("FENCESIM_TTL_MAX", c.TTLMax, fmt.Sprintf("must be FENCESIM_TTL_MIN (%v)..24h", c.TTLMin))
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 100000 {
		bad("FENCESIM_MAX_INFLIGHT", c.MaxInFlight, "must be 1..100000")
	}
	if c.MinInFlight < 0 || c.MinInFlight > c.MaxInFlight {
		bad("FENCESIM_MIN_INFLIGHT", c.MinInFlight, fmt.Sprintf("must be 1..FENCESIM_MAX_INFLIGHT (%d), or 0 for FENCESIM_REDIS_POOL_SIZE", c.MaxInFlight))
	}
	if !slices.Contains(lockapi.Algorithms, c.Admission) {
		bad("FENCESIM_ADMISSION", c.Admission, "must be one of "+strings.Join(lockapi.Algorithms, ", "))
	}
	if c.LatencyTarget < time.Millisecond || c.LatencyTarget > 10*time.Second {
		bad("FENCESIM_LATENCY_TARGET", c.LatencyTarget, "must be 1ms..10s")
	}
	if c.MaxBodyBytes < 512 || c.MaxBodyBytes > 1<<20 {
		bad("FENCESIM_MAX_BODY_BYTES", c.MaxBodyBytes, "must be 512..1048576")
	}
	if c.RetryAfter < time.Millisecond || c.RetryAfter > time.Minute {
		bad("FENCESIM_RETRY_AFTER", c.RetryAfter, "must be 1ms..1m")
	}
	if c.DrainTimeout < 0 || c.DrainTimeout > 10*time.Minute {
		bad("FENCESIM_DRAIN_TIMEOUT", c.DrainTimeout, "must be 0..10m")
	}
	if c.DrainDelay < 0 || c.DrainDelay > c.DrainTimeout {
		bad("FENCESIM_DRAIN_DELAY", c.DrainDelay, fmt.Sprintf("must be 0..FENCESIM_DRAIN_TIMEOUT (%v)", c.DrainTimeout))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("FENCESIM_LOG_FORMAT", c.LogFormat, "must be text or json")
	}
	if _, err := testhooks.ParseEnabled(c.TestHooks); err != nil {
		bad(testhooks.EnvVar, c.TestHooks, err.Error())
	}
	if _, err := c.apiAuth(); err != nil {
		bad("FENCESIM_CLIENT_TOKENS_FILE / FENCESIM_API_*_FILE", c.ClientTokens+" "+c.APICertFile, err.Error())
	}
	if c.TokenFloor > 0 && !c.RedisInit {
		bad("FENCESIM_TOKEN_FLOOR", c.TokenFloor, "takes effect only with FENCESIM_REDIS_INIT=true (it is the floor of a new epoch)")
	}
	if c.TokenKeyFile != "" {
		if _, err := fencemac.LoadKey(c.TokenKeyFile); err != nil {
			bad("FENCESIM_TOKEN_KEY_FILE", c.TokenKeyFile, err.Error())
		}
	}
	return p
}

// testHooks reports whether FENCESIM_TEST_HOOKS=1 (validated).
func (c config) testHooks() bool {
	on, _ := testhooks.ParseEnabled(c.TestHooks)
	return on
}

// minInFlight is the admission limit's floor: FENCESIM_MIN_INFLIGHT, or by
// default the Redis pool's size (at most the maximum). Below what the pool
// carries a latency gradient throttles Redis's group commit: with
// appendfsync always, more scripts in flight make each slower (one fsync
// per event loop serves them all) while throughput rises, which the
// gradient reads as queueing. With a floor of 16, 64 clients on locks of
// their own were shed (941 429s in 3 s) for a p99 of 314 ms, where raw
// Redis's was 23 ms (fencesim-bench, per-worker 64; docs/performance.md).
func (c config) minInFlight() int {
	if c.MinInFlight > 0 {
		return c.MinInFlight
	}
	return min(c.RedisPoolSize, c.MaxInFlight)
}

// serverConfig is the lock API's policy from c.
func (c config) serverConfig() lockapi.Config {
	return lockapi.Config{
		MinTTL: c.TTLMin, MaxTTL: c.TTLMax, MaxBodyBytes: c.MaxBodyBytes,
		Limiter:    lockapi.LimiterConfig{Algorithm: c.Admission, Min: c.minInFlight(), Max: c.MaxInFlight, Target: c.LatencyTarget},
		RetryAfter: c.RetryAfter, RequestTimeout: 4 * c.RedisTimeout, DrainDelay: c.DrainDelay,
		TokenKey: c.tokenKey(),
	}
}

// apiAuth is the API's TLS and client identities (validated).
func (c config) apiAuth() (svcmain.APIAuth, error) {
	a := svcmain.APIAuth{TokensFile: c.ClientTokens, CertFile: c.APICertFile, KeyFile: c.APIKeyFile}
	if c.ClientTokens != "" {
		t, err := clientauth.Load(c.ClientTokens)
		if err != nil {
			return a, err
		}
		a.Tokens = t
	}
	return a, a.Check("FENCESIM_")
}

// tokenKey is the fencing key (validated), nil without one.
func (c config) tokenKey() []byte {
	if c.TokenKeyFile == "" {
		return nil
	}
	k, _ := fencemac.LoadKey(c.TokenKeyFile)
	return k
}

func fields() []reflect.StructField {
	t := reflect.TypeOf(config{})
	fs := make([]reflect.StructField, t.NumField())
	for i := range fs {
		fs[i] = t.Field(i)
	}
	return fs
}

func varNames() map[string]bool {
	m := map[string]bool{}
	for _, f := range fields() {
		m[f.Tag.Get("env")] = true
	}
	return m
}

func fieldVar(name string) string {
	for _, f := range fields() {
		if f.Name == name {
			return f.Tag.Get("env")
		}
	}
	return name
}

// usage lists every variable with its default and what it means.
func usage(w io.Writer) {
	fmt.Fprint(w, `fencesim-lockd: the lock API (fencing tokens) over Redis; stateless, run
two or more behind a load balancer. Configured only by the environment:

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range fields() {
		def := f.Tag.Get("envDefault")
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  %s\tdefault %s\t%s\n", f.Tag.Get("env"), def, f.Tag.Get("help"))
	}
	tw.Flush()
	fmt.Fprint(w, "\nA bad value exits 2 naming the variable. SIGTERM drains: /readyz 503, in-flight requests finish, exit 0.\n")
}

// pipelines is lockd.Options.Pipelines: FENCESIM_REDIS_PIPELINES, with 0
// (no pipelining) as the backend's -1.
func (c config) pipelines() int {
	if c.RedisPipelines == 0 {
		return -1
	}
	return c.RedisPipelines
}
