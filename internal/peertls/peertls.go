// Package peertls authenticates the replicas of a fencesim-node group to
// each other with mutual TLS (realrt.PeerTLS): every replica has a
// certificate, signed by the group's CA, whose DNS name is
// "fencesim-node-<id>" (MemberName), and presents it both as a server and
// as a client. A connection from a certificate that the CA did not sign,
// or that names no member, is refused at the handshake, before a byte of
// Raft is read. Certificates and the CA are read from PEM files, and read
// again on Reload (SIGHUP) or when a file changes (Watch), so that a
// certificate can be rotated without a restart; connections already open
// keep the certificate they were made with.
package peertls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
)

// namePrefix starts every member's certificate name.
const namePrefix = "fencesim-node-"

// MemberName is the DNS name in the certificate of member id.
func MemberName(id process.NodeID) string { return namePrefix + strconv.Itoa(int(id)) }

// Files names a replica's PEM files: the group's CA certificate, its own
// certificate (chain) and its private key.
type Files struct {
	CA, Cert, Key string
}

// material is one loading of the files.
type material struct {
	cert   tls.Certificate
	pool   *x509.CertPool
	stamps string // the files' sizes and modification times
}

// Reloader holds a replica's current certificate and CA.
type Reloader struct {
	files Files
	cur   atomic.Pointer[material]
}

// Load reads the files; the error names the file at fault.
func Load(f Files) (*Reloader, error) {
	r := &Reloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again; on an error the current material stays.
func (r *Reloader) Reload() error {
	m, err := load(r.files)
	if err != nil {
		return err
	}
	r.cur.Store(m)
	return nil
}

func stamps(f Files) string {
	var b strings.Builder
	for _, p := range []string{f.CA, f.Cert, f.Key} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

func load(f Files) (*material, error) {
	st := stamps(f)
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("peer CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("peer CA file %s holds no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("peer certificate %s / key %s: %w", f.Cert, f.Key, err)
	}
	return &material{cert: cert, pool: pool, stamps: st}, nil
}

// Watch reloads the files whenever their size or modification time
// changes, polling every interval, until ctx ends; a failed reload is
// logged and the current material kept.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if stamps(r.files) == r.cur.Load().stamps {
			continue
		}
		if err := r.Reload(); err != nil {
			log.Error("peer TLS files changed but do not load; keeping the current ones", slog.Any("err", err))
			continue
		}
		log.Info("peer TLS files reloaded", slog.String("cert", r.files.Cert))
	}
}

// PeerTLS is the realrt configuration over the current material.
func (r *Reloader) PeerTLS() *realrt.PeerTLS {
	return &realrt.PeerTLS{
		Server: &tls.Config{
			MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert,
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				m := r.cur.Load()
				return &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert,
					Certificates: []tls.Certificate{m.cert}, ClientCAs: m.pool}, nil
			},
		},
		Client: func(id process.NodeID) *tls.Config {
			m := r.cur.Load()
			return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: m.pool, ServerName: MemberName(id),
				Certificates: []tls.Certificate{m.cert}}
		},
		PeerID: PeerID,
	}
}

// PeerID is the member a verified certificate names: exactly one DNS name
// "fencesim-node-<id>".
func PeerID(cs tls.ConnectionState) (process.NodeID, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return -1, errors.New("no verified certificate")
	}
	id := process.NodeID(-1)
	for _, n := range cs.VerifiedChains[0][0].DNSNames {
		s, ok := strings.CutPrefix(n, namePrefix)
		if !ok {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return -1, fmt.Errorf("certificate name %q is not %s<id>", n, namePrefix)
		}
		if id >= 0 {
			return -1, fmt.Errorf("certificate names two members, %d and %d", id, v)
		}
		id = process.NodeID(v)
	}
	if id < 0 {
		return -1, fmt.Errorf("certificate %q names no member (%s<id>)", cs.VerifiedChains[0][0].Subject.CommonName, namePrefix)
	}
	return id, nil
}

// DevFiles writes a throwaway CA and one certificate per member into dir
// (mode 0600), for a local cluster: what -dev-cluster runs with. The CA's
// key is kept beside it (ca-key.pem), so that a test can issue more: a
// throwaway CA only.
func DevFiles(dir string, ids []process.NodeID) (map[process.NodeID]Files, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "fencesim dev CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	caFile := filepath.Join(dir, "ca.pem")
	if err := writePEM(caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	caKDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "ca-key.pem"), "EC PRIVATE KEY", caKDER); err != nil {
		return nil, err
	}
	out := map[process.NodeID]Files{}
	for _, id := range ids {
		cf, kf, err := Issue(dir, caCert, caKey, MemberName(id), now.AddDate(1, 0, 0))
		if err != nil {
			return nil, err
		}
		out[id] = Files{CA: caFile, Cert: cf, Key: kf}
	}
	return out, nil
}

// Issue writes a certificate for name (its CommonName and only DNS name,
// good for server and client authentication) signed by ca, and its key,
// into dir as name.pem and name-key.pem.
func Issue(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, notAfter time.Time) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", kder)
}

// LoadDevCA reads back the throwaway CA DevFiles wrote into dir, to issue
// more certificates from it (Issue).
func LoadDevCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s holds no PEM block", name)
		}
		return blk.Bytes, nil
	}
	kb, err := read("ca-key.pem")
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb)
	if err != nil {
		return nil, nil, err
	}
	cb, err := read("ca.pem")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(cb)
	return cert, key, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
