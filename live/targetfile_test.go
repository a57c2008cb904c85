package live

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func loadTarget(t *testing.T, path string) *TargetFile {
	t.Helper()
	f, err := LoadTargetFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBuiltinTargetFiles: the reference and lockd are target files
// (targets/*.json); their declared servers are what they lay out.
func TestBuiltinTargetFiles(t *testing.T) {
	for name, servers := range map[string]string{"reference": "n1,n2,n3", "lockd": "redis,l1,l2"} {
		f, ok := builtin(t, name).(*TargetFile)
		if !ok {
			t.Fatalf("target %s is not a target file", name)
		}
		if got := strings.Join(f.Info().Servers, ","); got != servers {
			t.Errorf("%s: servers %s, want %s", name, got, servers)
		}
	}
	if b := builtin(t, "reference").Info().Binaries; strings.Join(b, ",") != "fencesim-node,fencesim-store,fencesim-liveclient" {
		t.Errorf("reference binaries %v", b)
	}
}

// TestBadTargetFiles: a target file that cannot work is an error naming
// what to fix.
func TestBadTargetFiles(t *testing.T) {
	srv := `{"name":"s1","command":["x"],"ready":{"http":"http://{addr:s1}/readyz"},"endpoint":"http://{addr:s1}"}`
	for _, c := range []struct{ file, want string }{
		{`{"name":"t","fenced":true,"servers":[],"client":{"lock_api":true}}`, "servers: none"},
		{`{"name":"t","servers":[` + srv + `],"client":{}}`, "either"},
		{`{"name":"t","servers":[` + srv + `],"client":{"lock_api":true},"extra":1}`, "unknown field"},
		{`{"name":"t","servers":[` + srv + `],"client":{"command":["x {nope}"]}}`, "client: unknown placeholder {nope}"},
		{`{"name":"t","servers":[{"name":"s1","command":["x"],"ready":{},"endpoint":"e"}],"client":{"lock_api":true}}`, "exactly one"},
		{`{"name":"t","servers":[{"name":"s1","command":["x {nope:a}"],"ready":{"tcp":"a"},"endpoint":"e"}],"client":{"lock_api":true}}`, "unknown placeholder {nope:a}"},
		{`{"name":"t","servers":[{"name":"s1","command":["x {peers}"],"ready":{"tcp":"a"},"endpoint":"e"}],"client":{"lock_api":true}}`, "without a peers template"},
		{`{"name":"t","servers":[{"name":"store","command":["x"],"ready":{"tcp":"a"},"endpoint":"e"}],"client":{"lock_api":true}}`, "not \"store\""},
	} {
		p := filepath.Join(t.TempDir(), "t.json")
		if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTargetFile(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.file, err, c.want)
		}
	}
}

// needPythonRedis skips unless Debian's python3 with redis-py
// (python3-redis) is installed, except in CI, where it fails.
func needPythonRedis(t *testing.T) {
	t.Helper()
	need(t, "redis-server")
	if err := exec.Command("/usr/bin/python3", "-c", "import redis").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("/usr/bin/python3 cannot import redis (%v): apt-get install python3-redis (CI is set, which requires it)", err)
		}
		t.Skipf("skipping: /usr/bin/python3 cannot import redis (apt-get install python3-redis); with CI set this is a failure")
	}
}

// TestPythonExample: examples/pylock, a lock service in Python described
// only by its target file, passes Kleppmann's pause (its fencing counter
// lets the store reject A's late write), and with its fencing removed by
// its flag (--no-fencing, target-no-fencing.json) A's late write lands:
// S3. With its own client in Python (client.py, the JSON-lines protocol
// instead of the Go client of the lock API) it passes as well.
func TestPythonExample(t *testing.T) {
	targetTest(t)
	needPythonRedis(t)
	kleppmann(t, loadTarget(t, "../examples/pylock/target.json"), kleppmannPlan(t))
	kleppmann(t, loadTarget(t, "../examples/pylock/target-own-client.json"), kleppmannPlan(t))
	staleWriteLanded(t, loadTarget(t, "../examples/pylock/target-no-fencing.json"))
}
