package drills

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/testutil/needs"
)

// TestPostgresFoundOffPath: on a fresh Debian machine `apt-get install
// postgresql` puts initdb and postgres in /usr/lib/postgresql/<v>/bin,
// which is not on PATH; the drill pairs must still find them there (as
// drill does) and run, not skip.
func TestPostgresFoundOffPath(t *testing.T) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		needs.Part(t, "Debian's PostgreSQL server package (/usr/lib/postgresql/<v>/bin)",
			errors.New("no /usr/lib/postgresql/*/bin/initdb (Debian: apt-get install postgresql)"))
	}
	// A PATH with the system's directories but none holding initdb.
	var path []string
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			path = append(path, d)
		}
	}
	t.Setenv("PATH", strings.Join(path, ":"))
	if p, err := exec.LookPath("initdb"); err == nil {
		t.Fatalf("initdb still on PATH at %s", p)
	}
	t.Setenv(needs.EnvCI, "true") // a skip would now be a failure
	needPostgres(t)
}

// TestMissingDockerFailsUnderCI runs TestComposeDrillPair in a mount
// namespace whose Docker socket is /dev/null (no engine answers): with
// CI=true it must fail naming the Docker engine, without CI it must skip
// saying the same. Needs root and unshare(1) (util-linux), as the rest of
// the suite's namespaces do.
func TestMissingDockerFailsUnderCI(t *testing.T) {
	const sock = "/var/run/docker.sock"
	if os.Geteuid() != 0 {
		needs.Part(t, "root (to hide the Docker socket in a mount namespace)", errors.New("the tests run as root on CI"))
	}
	unshare, err := exec.LookPath("unshare")
	needs.Part(t, "unshare (Debian: util-linux)", err)
	if _, err := os.Stat(sock); err != nil {
		t.Skipf("no %s to hide: %v", sock, err)
	}
	for _, tc := range []struct {
		name, ci string
		fail     bool
	}{
		{name: "CI=true fails", ci: "true", fail: true},
		{name: "outside CI skips", ci: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(unshare, "-m", "sh", "-c",
				`mount --bind /dev/null "$1" && exec "$2" -test.run='^TestComposeDrillPair$' -test.v`,
				"sh", sock, os.Args[0])
			// TMPDIR: the failing run keeps its (empty) work dir there.
			env := []string{needs.EnvCI + "=" + tc.ci, "TMPDIR=" + t.TempDir()}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, needs.EnvCI+"=") && !strings.HasPrefix(kv, "DOCKER_HOST=") && !strings.HasPrefix(kv, "TMPDIR=") {
					env = append(env, kv)
				}
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			failed := errors.As(err, &exit)
			if err != nil && !failed {
				t.Fatalf("run the test binary: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "Docker engine (the Compose pair) missing") {
				t.Errorf("output does not name the missing Docker engine:\n%s", out)
			}
			switch {
			case tc.fail && (!failed || !strings.Contains(string(out), "--- FAIL: TestComposeDrillPair")):
				t.Errorf("want TestComposeDrillPair to fail (exit %v):\n%s", err, out)
			case !tc.fail && (failed || !strings.Contains(string(out), "--- SKIP: TestComposeDrillPair")):
				t.Errorf("want TestComposeDrillPair skipped and the binary to pass (exit %v):\n%s", err, out)
			}
		})
	}
}
