package live

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Setup is what a target's Layout asks the harness for: free addresses,
// data directories, binaries and proxied links. A Setup belongs to one
// run.
type Setup struct {
	// Options are the run's target-specific options (simrun live -opt
	// k=v), also passed to every client process.
	Options map[string]string

	dir     string   // the run's directory; data directories go under it
	binDirs []string // searched before $PATH
	links   *linkSet
	// reserved are the listeners behind the addresses Free handed out,
	// held until the servers start, so that no proxy of the run (which
	// listens on port 0) is given one of them meanwhile.
	reserved []net.Listener
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Free returns a free loopback host:port. The harness holds it until
// the servers start (no proxy of the run can take it); the child process
// then binds it itself, so another program could take it in between: the
// server then fails its start with a clear error rather than the run
// talking to a stranger.
//
// The port is drawn below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where no outgoing connection is given
// a local port: from the ephemeral range, the port released for a server
// was at times taken by another process's connect (the run's own nodes
// dial their peers while the later ones start, and so does the rest of
// the machine) before the server bound it — "bind: address already in
// use" in 2 of about 130 runs here, and again at a restart on the same
// address. A port is still chosen free (listened on, and held), never
// fixed; with no room below the range, port 0 decides.
func (s *Setup) Free() (string, error) {
	lo := ephemeralLow()
	for range 64 {
		if lo-freeLow < 1000 {
			break
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freeLow+rand.IntN(lo-freeLow)))
		if err == nil {
			s.reserved = append(s.reserved, ln)
			return ln.Addr().String(), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("live: no free loopback port: %w", err)
	}
	s.reserved = append(s.reserved, ln)
	return ln.Addr().String(), nil
}

// freeLow is the lowest port Free draws: above the well-known and most
// registered services' ports.
const freeLow = 20000

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 0 || lo > 65535 {
		return 32768
	}
	return lo
}

// release lets go of the reserved addresses, just before the servers
// bind them.
func (s *Setup) release() {
	for _, ln := range s.reserved {
		ln.Close()
	}
	s.reserved = nil
}

// Dir returns the data directory of the process called name, created
// empty under the run's directory; the same name gives the same
// directory, so a restart keeps its data.
func (s *Setup) Dir(name string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("live: data directory name %q must be [A-Za-z0-9._-], at most 64", name)
	}
	d := filepath.Join(s.dir, "data", name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("live: %w", err)
	}
	return d, nil
}

// ErrNoBinary matches the error of Bin for an executable found nowhere.
var ErrNoBinary = errors.New("live: binary not found")

// Bin returns the path of the executable name, looked up in the
// harness's binary directories (simrun live -bin), then on $PATH.
func (s *Setup) Bin(name string) (string, error) {
	return findBin(s.binDirs, name)
}

func findBin(dirs []string, name string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	how, ok := binHints[name]
	if !ok {
		how = "build it: go build -o DIR ./cmd/" + name + ", then pass -bin DIR"
	}
	return "", fmt.Errorf("%w: %s is neither in %v nor on $PATH (%s)", ErrNoBinary, name, dirs, how)
}

// binHints say how to get the executables that are not this module's
// commands (./cmd/NAME): the outside servers, and the etcd client, which
// is its own module.
var binHints = map[string]string{
	"redis-server":       "install it: apt-get install redis-server",
	"etcd":               "install it: apt-get install etcd-server",
	"fencesim-live-etcd": "build it: go -C live/etcdclient build -o DIR/fencesim-live-etcd ., then pass -bin DIR",
}

// Link returns the address process from must dial to reach addr, the
// listener of process to, through the fault proxy of the directed link
// from→to: bytes from the dialer are the from→to direction, bytes back
// the to→from direction, so a one-way block of from→to cuts the first on
// this link and the second on the link to→from. Call it once per
// (from, to): the proxy listens until the run ends.
func (s *Setup) Link(from, to, addr string) (string, error) {
	return s.links.add(from, to, addr)
}
