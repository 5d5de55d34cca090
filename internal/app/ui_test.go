package app

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIUsageErrorsTouchNothing checks that a console that cannot start
// is bad usage (exit 2) reported before the run touches anything: no
// report directory, no state directory.
func TestUIUsageErrorsTouchNothing(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	shortToken := filepath.Join(dir, "short-token")
	if err := os.WriteFile(shortToken, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const scheduled = "internal/console/testdata/console.yaml"
	const manual = "internal/console/testdata/browser.yaml"
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"port in use", []string{"--ui", "--ui-addr", busy.Addr().String(), scheduled}, "address already in use"},
		{"network without token file", []string{"--ui", "--ui-addr", "0.0.0.0:0", scheduled}, "needs --ui-token-file"},
		{"bad address", []string{"--ui", "--ui-addr", "nowhere", scheduled}, "console address"},
		{"missing token file", []string{"--ui", "--ui-token-file", filepath.Join(dir, "none"), scheduled}, "read the console token file"},
		{"short token", []string{"--ui", "--ui-token-file", shortToken, scheduled}, "at least 16 characters"},
		{"linger without ui", []string{"--ui-linger", scheduled}, "need --ui"},
		{"manual fault without ui", []string{manual}, "run with --ui"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, state := filepath.Join(dir, c.name, "out"), filepath.Join(dir, c.name, "state")
			args := append([]string{"run", "--out", out, "--state-dir", state}, c.args...)
			code, stdout, stderr := drill(t, args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, c.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			for _, p := range []string{out, state} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused run (stat: %v)", p, err)
				}
			}
		})
	}
}
