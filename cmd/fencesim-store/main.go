// Command fencesim-store serves the fenced store over HTTP (package
// storesvc): the storage a lock protects, refusing a write whose fencing
// token is below the highest it has accepted for the key. It runs the
// simulator's store code on the real runtime, fsyncing every decision
// before it answers. Configuration comes from flags or the environment
// (fencesim-store -h lists them); SIGTERM drains.
package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/storesvc"
)

func main() {
	svcmain.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], svcmain.Environ(), os.Stderr, nil)
	})
}

// run is the whole program: it returns the exit code (0 clean drain, 1
// runtime failure, 2 bad configuration). ready, if set, gets the bound
// address once the listener is open.
func run(ctx context.Context, args []string, env map[string]string, stderr io.Writer, ready func(addr string)) int {
	cfg, err := loadConfig(args, env, stderr)
	if code, stop := svcmain.ConfigExit("fencesim-store", err, stderr); stop {
		return code
	}
	log := svcmain.Logger(stderr, cfg.LogFormat)

	scfg := cfg.serviceConfig()
	scfg.Logger = log
	svc, err := storesvc.Open(scfg)
	if err != nil {
		log.Error("opening the store (FENCESIM_STORE_DATA / -data)", slog.String("dir", cfg.DataDir), slog.Any("err", err))
		return 1
	}
	defer func() {
		if err := svc.Close(); err != nil {
			log.Error("closing the store", slog.Any("err", err))
		}
	}()
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		log.Error("listen (FENCESIM_STORE_LISTEN / -listen)", slog.String("addr", cfg.Listen), slog.Any("err", err))
		return 1
	}
	addr := l.Addr().String()
	if l, err = cfg.API.Listener(ctx, log, l); err != nil {
		log.Error("the API's TLS (FENCESIM_STORE_API_*_FILE)", slog.Any("err", err))
		return 1
	}
	served := make(chan error, 1)
	go func() { served <- svc.Serve(l) }()
	log.Info("fencesim-store serving", slog.String("addr", addr), slog.String("data", cfg.DataDir))
	if ready != nil {
		ready(addr)
	}

	return svcmain.ServeUntilDone(ctx, log, "fencesim-store", served, cfg.DrainTimeout, cfg.DrainDelay+cfg.DrainTimeout, svc.Shutdown)
}
