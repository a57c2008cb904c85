// Command fencesim-live-etcd is the client process of simrun live's
// etcd-mutex and etcd-mutex-fenced targets: etcd's concurrency.Mutex
// (go.etcd.io/etcd/client/v3) driven by the harness's protocol on
// stdin/stdout (package liveclient). With -opt fenced=true it returns the
// lock key's create revision as the fencing token.
//
// It is its own module, as bench/etcd is, so that the etcd client (gRPC,
// protobuf, zap…) stays out of fencesim's module graph. Build it with
//
//	go -C live/etcdclient build -o DIR/fencesim-live-etcd .
//
// (-o matters: the directory's default binary name would not be found by
// the harness) and pass -bin DIR to simrun live.
package main

import (
	"github.com/fencesim/fencesim/live/liveclient"
)

func main() {
	liveclient.Main(func(cfg liveclient.Config) (liveclient.Locker, error) { return open(cfg) })
}
