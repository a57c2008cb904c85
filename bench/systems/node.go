package systems

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
)

// Node is a three-replica fencesim-node cluster in this process, built as
// `fencesim-node -dev-cluster 3` builds it: the reference replica on the
// real runtime, its log fsynced by a majority before a reply, behind the
// HTTP lock API with the default configuration (adaptive limit included).
type Node struct {
	backends []*nodesvc.Backend
	servers  []*lockapi.Server
	// Endpoints are the HTTP base URLs, the leader's first.
	Endpoints []string
	// HTTP is the client for the API (nil: the Go client's default); with
	// API TLS it trusts the cluster's throwaway CA.
	HTTP *http.Client
}

// NodeOptions vary the cluster StartNode starts from fencesim-node's
// defaults, to measure what each costs.
type NodeOptions struct {
	PeerTLS    bool // replicas authenticate each other with mutual TLS (the default)
	APITLS     bool // the lock API over TLS
	SyncWrites bool // fsync each Raft Ready in the replica's loop (nodesvc.Config.SyncWrites)
}

// StartNode starts the cluster with data under dir and waits (at most
// 10s) for a leader. With peerTLS its replicas authenticate each other
// with mutual TLS under a throwaway CA, as -dev-cluster does; with apiTLS
// the lock API is served over TLS (a certificate for "localhost" from the
// same CA) and Node.HTTP trusts it.
func StartNode(dir string, log *slog.Logger, o NodeOptions) (*Node, error) {
	peerTLS, apiTLS := o.PeerTLS, o.APITLS
	n := &Node{}
	const size = 3
	ptls := make([]*realrt.PeerTLS, size)
	ids := []process.NodeID{0, 1, 2}
	files, err := peertls.DevFiles(dir, ids)
	if err != nil {
		return nil, err
	}
	if peerTLS {
		for _, id := range ids {
			r, err := peertls.Load(files[id])
			if err != nil {
				return nil, err
			}
			ptls[id] = r.PeerTLS()
		}
	}
	var apiCert *tls.Certificate
	scheme := "http://"
	if apiTLS {
		ca, key, err := peertls.LoadDevCA(dir)
		if err != nil {
			return nil, err
		}
		cf, kf, err := peertls.Issue(dir, ca, key, "localhost", time.Now().AddDate(0, 0, 1))
		if err != nil {
			return nil, err
		}
		c, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			return nil, err
		}
		apiCert, scheme = &c, "https://"
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256 // as the Go client's own transport
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "localhost"}
		n.HTTP = &http.Client{Transport: tr}
	}
	var hls, rls []net.Listener
	peers := make([]nodesvc.Peer, size)
	for i := range size {
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, closeAll(err, hls, rls)
		}
		hls = append(hls, hl)
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, closeAll(err, hls, rls)
		}
		rls = append(rls, rl)
		peers[i] = nodesvc.Peer{ID: process.NodeID(i), Raft: rl.Addr().String(), HTTP: scheme + hl.Addr().String()}
	}
	for i := range size {
		b, err := nodesvc.Open(nodesvc.Config{ID: process.NodeID(i), DataDir: filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			Listener: rls[i], Peers: peers, Logger: log.With("node", i), PeerTLS: ptls[i], SyncWrites: o.SyncWrites})
		if err != nil {
			n.Close()
			return nil, closeAll(fmt.Errorf("starting replica %d: %w", i, err), hls[i:], rls[i+1:])
		}
		s := lockapi.NewServer(b, lockapi.Config{Logger: log.With("node", i), Limiter: nodesvc.APILimiter("")})
		l := hls[i]
		if apiCert != nil {
			l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*apiCert}})
		}
		go s.Serve(l)
		n.backends, n.servers = append(n.backends, b), append(n.servers, s)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for i, b := range n.backends {
			if b.IsLeader() {
				for j := range size {
					n.Endpoints = append(n.Endpoints, peers[(i+j)%size].HTTP)
				}
				return n, nil
			}
		}
		if time.Now().After(end) {
			n.Close()
			return nil, fmt.Errorf("fencesim-node: no leader within 10s")
		}
	}
}

// Close drains the HTTP fronts, then stops the replicas.
func (n *Node) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range n.servers {
		s.Shutdown(ctx)
	}
	for _, b := range n.backends {
		b.Close()
	}
	n.servers, n.backends = nil, nil
}

func closeAll(err error, ls ...[]net.Listener) error {
	for _, l := range ls {
		for _, x := range l {
			x.Close()
		}
	}
	return err
}
