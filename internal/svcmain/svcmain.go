// Package svcmain holds what the service commands (fencesim-node,
// fencesim-store, fencesim-lockd, fencesim-bench) share: a settings table
// read from flags, then FENCESIM_* variables, then defaults, with its -h
// listing; running until SIGTERM or SIGINT; the logger; and draining a
// server. Each command keeps its own settings, messages and exit codes.
package svcmain

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencesim/fencesim/internal/clientauth"
	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/internal/testhooks"
)

// Main runs run with a context cancelled by SIGTERM or SIGINT and exits
// with the code it returns.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// Environ is the process environment as a map.
func Environ() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Logger logs to w as text, or as JSON if format is "json".
func Logger(w io.Writer, format string) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, nil)
	if format == "json" {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(h)
}

// Setting is one configurable value: its flag, its variable, its default
// and what it accepts. Set validates a value and stores it in *C.
type Setting[C any] struct {
	Flag, Env, Def, Help string
	Set                  func(c *C, v string) error
}

// ErrHelp is -h: usage was printed, exit 0.
var ErrHelp = errors.New("help requested")

// Load reads every setting from args (flags), else env, else its default,
// and validates it. The error names the flag or variable, the value and
// what is allowed (a rejected default names the variable and the flag).
// -h prints usage to stderr and returns ErrHelp.
func Load[C any](name string, settings []Setting[C], args []string, env map[string]string, stderr io.Writer, usage func(io.Writer)) (C, error) {
	var c C
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vals := make([]*string, len(settings))
	for i, s := range settings {
		vals[i] = fs.String(s.Flag, "", s.Help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stderr)
			return c, ErrHelp
		}
		return c, fmt.Errorf("%v (%s -h lists the flags)", err, name)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (%s -h lists the flags)", fs.Arg(0), name)
	}
	// A misspelt variable of this service is an error, not silence.
	prefix := "FENCESIM_" + strings.ToUpper(strings.TrimPrefix(name, "fencesim-")) + "_"
	known := map[string]bool{}
	for _, s := range settings {
		known[s.Env] = true
	}
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, prefix) && !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return c, fmt.Errorf("unknown variable %s (%s -h lists the %s* variables)", strings.Join(unknown, ", "), name, prefix)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for i, s := range settings {
		v, src := s.Def, "default"
		if ev, ok := env[s.Env]; ok {
			v, src = ev, s.Env
		}
		if given[s.Flag] {
			v, src = *vals[i], "-"+s.Flag
		}
		if err := s.Set(&c, v); err != nil {
			var zero C
			if src == "default" {
				return zero, fmt.Errorf("%s (or -%s) %v", s.Env, s.Flag, err)
			}
			return zero, fmt.Errorf("%s=%q: %v", src, v, err)
		}
	}
	return c, nil
}

// Usage lists the settings, the variable names padded to envWidth.
func Usage[C any](w io.Writer, settings []Setting[C], envWidth int) {
	for _, s := range settings {
		def := s.Def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(w, "  -%-16s %-*s default %s\n      %s\n", s.Flag, envWidth, s.Env, def, s.Help)
	}
}

// IntIn accepts an integer in lo..hi.
func IntIn[C any](lo, hi int, set func(*C, int)) func(*C, string) error {
	return func(c *C, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in %d..%d", lo, hi)
		}
		set(c, n)
		return nil
	}
}

// DurIn accepts a duration in lo..hi.
func DurIn[C any](lo, hi time.Duration, set func(*C, time.Duration)) func(*C, string) error {
	return func(c *C, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < lo || d > hi {
			return fmt.Errorf("must be a duration in %v..%v, such as 500ms or 2s", lo, hi)
		}
		set(c, d)
		return nil
	}
}

// Bool accepts true or false (and strconv.ParseBool's other spellings).
func Bool[C any](set func(*C, bool)) func(*C, string) error {
	return func(c *C, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("must be true or false")
		}
		set(c, b)
		return nil
	}
}

// ValidHostname reports whether h is a syntactically valid host name.
func ValidHostname(h string) bool {
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

// ServeUntilDone waits for ctx (the signal) or for serving to fail, then
// drains: shutdown gets deadline to finish in-flight requests (the log
// line names timeout). It returns the exit code: 0 drained, 1 otherwise.
func ServeUntilDone(ctx context.Context, log *slog.Logger, name string, served chan error, timeout, deadline time.Duration, shutdown func(context.Context) error) int {
	select {
	case err := <-served:
		log.Error("serve", slog.Any("err", err))
		return 1
	case <-ctx.Done():
	}
	log.Info(name+" draining", slog.Duration("timeout", timeout))
	dctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := shutdown(dctx); err != nil {
		log.Error("drain cut short: in-flight requests were aborted", slog.Any("err", err))
		return 1
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", slog.Any("err", err))
		return 1
	}
	log.Info(name + " drained")
	return 0
}

// S is a Setting, for tables written one setting a line.
func S[C any](flag, env, def, help string, set func(c *C, v string) error) Setting[C] {
	return Setting[C]{Flag: flag, Env: env, Def: def, Help: help, Set: set}
}

// CheckHostPort accepts host:port with a numeric port and an IP address,
// a host name or nothing as the host; example is shown when v is not
// host:port.
func CheckHostPort(v, example string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("must be host:port, e.g. " + example)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return errors.New("the port must be a number in 0..65535")
	}
	if host != "" && net.ParseIP(host) == nil && !ValidHostname(host) {
		return errors.New("the host must be an IP address or a host name")
	}
	return nil
}

// ConfigExit reports what run does after loading its configuration: with
// stop, return code (0 after -h; 2, the error printed as name: err, for a
// bad configuration).
func ConfigExit(name string, err error, stderr io.Writer) (code int, stop bool) {
	if errors.Is(err, ErrHelp) {
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2, true
	}
	return 0, false
}

// TestHooks is the FENCESIM_TEST_HOOKS setting (flag -test-hooks): 1
// mounts the test-only /test/* endpoints (package testhooks) for live
// fault-injection runs.
func TestHooks[C any](set func(c *C, on bool)) Setting[C] {
	return S(testhooks.FlagName, testhooks.EnvVar, "0", "TEST ONLY, never in a deployment: 1 serves the /test/* fault endpoints (clock skew, slow fsync, ...) for live fault-injection runs", func(c *C, v string) error {
		on, err := testhooks.ParseEnabled(v)
		set(c, on)
		return err
	})
}

// TokenKeyFile is a service's fencing-key setting (flag -token-key-file):
// the file of the key the lock service and the fenced store share, so that
// the store accepts only tokens the lock service signed (package
// fencemac). Empty: no key (tokens are not signed, or not checked).
func TokenKeyFile[C any](env, role string, set func(c *C, key []byte)) Setting[C] {
	return S("token-key-file", env, "", "file of the fencing key shared by the lock service and the store (≥32 bytes, mode 600); "+role, func(c *C, v string) error {
		if v == "" {
			set(c, nil)
			return nil
		}
		k, err := fencemac.LoadKey(v)
		set(c, k)
		return err
	})
}

// OnSIGHUP calls reload on every SIGHUP until ctx ends, logging the
// outcome under what; a failed reload keeps what was loaded before.
func OnSIGHUP(ctx context.Context, log *slog.Logger, what string, reload func() error) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := reload(); err != nil {
					log.Error("SIGHUP: "+what+" do not load; keeping the current ones", slog.Any("err", err))
				} else {
					log.Info("SIGHUP: " + what + " reloaded")
				}
			}
		}
	}()
}

// ClientAuth is a service's client settings: the bearer-token file that
// names its clients (package clientauth) and the certificate and key
// files of its API's TLS. prefix starts each variable, e.g.
// "FENCESIM_NODE_".
func ClientAuth[C any](prefix string, set func(c *C) *APIAuth) []Setting[C] {
	return []Setting[C]{
		S("client-tokens-file", prefix+"CLIENT_TOKENS_FILE", "", "file of the API's clients, one \"<identity> <token>\" a line (mode 600; reloaded on SIGHUP): a request needs Authorization: Bearer <token>, and acts only under its identity; empty: clients are not authenticated", func(c *C, v string) error {
			a := set(c)
			a.TokensFile, a.Tokens = v, nil
			if v == "" {
				return nil
			}
			t, err := clientauth.Load(v)
			a.Tokens = t
			return err
		}),
		S("api-cert-file", prefix+"API_CERT_FILE", "", "PEM certificate (chain) of the API's TLS (with -api-key-file; reloaded on SIGHUP); empty: plain HTTP", func(c *C, v string) error {
			set(c).CertFile = v
			return nil
		}),
		S("api-key-file", prefix+"API_KEY_FILE", "", "PEM private key of the API's TLS certificate", func(c *C, v string) error {
			set(c).KeyFile = v
			return nil
		}),
	}
}

// APIAuth is what ClientAuth reads.
type APIAuth struct {
	TokensFile string
	Tokens     *clientauth.Tokens
	CertFile   string
	KeyFile    string
}

// Check validates the pair of TLS files (both or neither, and loadable).
func (a APIAuth) Check(prefix string) error {
	if (a.CertFile == "") != (a.KeyFile == "") {
		return fmt.Errorf("%sAPI_CERT_FILE and %sAPI_KEY_FILE go together: set both or neither", prefix, prefix)
	}
	if a.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile); err != nil {
			return fmt.Errorf("%sAPI_CERT_FILE / %sAPI_KEY_FILE: %v", prefix, prefix, err)
		}
	}
	return nil
}

// Listener wraps l in the API's TLS when configured (the certificate read
// again on SIGHUP, until ctx ends), and arranges the token file's reload
// on SIGHUP; it returns l itself without TLS.
func (a APIAuth) Listener(ctx context.Context, log *slog.Logger, l net.Listener) (net.Listener, error) {
	if a.Tokens != nil {
		OnSIGHUP(ctx, log, "client tokens", a.Tokens.Reload)
	}
	if a.CertFile == "" {
		return l, nil
	}
	var cur atomic.Pointer[tls.Certificate]
	load := func() error {
		c, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
		if err == nil {
			cur.Store(&c)
		}
		return err
	}
	if err := load(); err != nil {
		return nil, err
	}
	OnSIGHUP(ctx, log, "API certificate", load)
	return tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cur.Load(), nil }}), nil
}

// Authenticate is lockapi.Config.Authenticate for the token file, nil
// without one.
func (a APIAuth) Authenticate() func(r *http.Request) (string, bool) {
	if a.Tokens == nil {
		return nil
	}
	return a.Tokens.Identify
}
