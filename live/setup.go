package live

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"github.com/fencesim/fencesim/internal/freeport"
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
// talking to a stranger. The port is drawn below the kernel's ephemeral
// range (internal/freeport), where no outgoing connection is given a
// local port, so neither the run's own nodes dialing their peers nor the
// rest of the machine takes it before the server binds it, or binds it
// again at a restart.
func (s *Setup) Free() (string, error) {
	ln, err := freeport.Listen()
	if err != nil {
		return "", fmt.Errorf("live: %w", err)
	}
	s.reserved = append(s.reserved, ln)
	return ln.Addr().String(), nil
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
