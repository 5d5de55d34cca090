package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGKILLLeavesPostgresForCleanup kills drill run (SIGKILL: no
// teardown runs) once its throwaway PostgreSQL is up, and once while a
// process pause holds it stopped. The cluster's temp dir (tens of MB) is
// left in drill's TMPDIR, and in the pause the cluster's processes stay
// stopped; `drill cleanup` must continue and stop them, remove the dir and
// say so, and a second cleanup finds nothing.
func TestSIGKILLLeavesPostgresForCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, _ := binaries(t)
	for _, tc := range []struct {
		name  string
		pause bool
	}{
		{"sigkill-after-postgres-started", false},
		{"sigkill-during-process-pause", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCase(t)
			t.Cleanup(func() { killProcesses(c) })
			scenario := c.writeScenario(t, "process-pause.yaml.tmpl", map[string]string{"Name": tc.name, "FaultAt": "3s"})
			p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
			started := p.waitLine(logPGStarted)
			dir := logValue(started, "dir")
			pgid, err := strconv.Atoi(logValue(started, "pgid"))
			if dir == "" || err != nil || pgid <= 1 {
				t.Fatalf("no dir or pgid in %q", started)
			}
			var stopped []int // processes of the cluster stopped by the pause
			if tc.pause {
				p.waitLine(logFaultOn)
				if !eventually(10*time.Second, func() bool { return procState(pgid) == "T" }) {
					t.Fatalf("postmaster %d state %q during the pause, want T", pgid, procState(pgid))
				}
			} else {
				p.waitLine(logReady)
			}
			p.signal(syscall.SIGKILL)
			if _, sig := p.exit(); sig != syscall.SIGKILL {
				t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
			}
			if tc.pause {
				for _, pr := range processesOf(c) {
					if pr.State == "T" {
						stopped = append(stopped, pr.PID)
					}
				}
				if len(stopped) == 0 {
					t.Fatalf("after SIGKILL no process of the cluster is stopped; the test needs them:\n%s", joinProcs(processesOf(c)))
				}
			}
			if fi, err := os.Stat(filepath.Join(dir, "data")); err != nil || !fi.IsDir() {
				t.Fatalf("after SIGKILL the data dir %s/data is not there (%v); the test needs it", dir, err)
			}

			code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--state-dir", c.State)
			if code != 0 || !strings.Contains(out, "removed  throwaway PostgreSQL postgres in "+dir) || !strings.Contains(out, "removed the directory") {
				t.Fatalf("drill cleanup: exit %d, stdout %q; want 0 and the PostgreSQL in %s removed", code, out, dir)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("after drill cleanup %s remains: %v", dir, err)
			}
			if left, _ := filepath.Glob(filepath.Join(c.Tmp, "drill-pg-*")); len(left) > 0 {
				t.Fatalf("PostgreSQL temp dirs remain: %v", left)
			}
			requireNoProcesses(t, c)
			if code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--state-dir", c.State); code != 0 || !strings.Contains(out, "nothing to clean up") {
				t.Fatalf("second drill cleanup: exit %d, stdout %q; want 0 and nothing to clean up", code, out)
			}
		})
	}
}
