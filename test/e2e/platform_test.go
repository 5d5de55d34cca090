package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// TestSIGKILLMidRollout: drill run is killed with SIGKILL in the middle of
// a rollout (old and new pods running, an old one in its preStop sleep).
// Every replica, old and new, ends with drill; drill cleanup then finds
// the rollout's journaled pods gone and says why the service is not
// brought back to its declared replicas there.
func TestSIGKILLMidRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process for a few seconds")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	t.Cleanup(func() { killProcesses(c) })
	scenario := c.writeScenario(t, "rollout.yaml.tmpl", map[string]string{"Name": "rollout", "ServiceExe": testproc.Executable(t)})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	// The first old pod is deleted (its preStop sleep holds it 5 s) once
	// the first new pod is ready: the rollout is under way.
	journal := inject.JournalPath(c.State, c.RunID)
	deadline := time.Now().Add(wait)
	for !strings.Contains(readFile(journal), `"kind":"local-pods"`) || len(replicas(c)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no rollout under way after %s; journal:\n%s\nprocesses:\n%s", wait, readFile(journal), joinProcs(processesOf(c)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.signal(syscall.SIGKILL)
	if _, sig := p.exit(); sig != syscall.SIGKILL {
		t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
	}
	if !eventually(20*time.Second, func() bool { return len(replicas(c)) == 0 }) {
		t.Fatalf("replicas outlived their SIGKILLed drill by 20 s:\n%s", joinProcs(replicas(c)))
	}
	code, out := runDrill(t, c, drill, "cleanup", "--state-dir", c.State, "--run", c.RunID)
	if code != 0 {
		t.Fatalf("drill cleanup exited %d\n%s", code, out)
	}
	t.Logf("drill cleanup after the SIGKILL:\n%s", out)
	if !strings.Contains(out, "pods of local service svc ended by fault roll") ||
		!strings.Contains(out, "its 2 declared replicas start with the next run") {
		t.Errorf("drill cleanup does not account for the rollout's pods:\n%s", out)
	}
}

// replicas are the e2e service's processes of case c.
func replicas(c *caseEnv) []proc {
	var out []proc
	for _, p := range processesOf(c) {
		if strings.Contains(p.Cmdline, "-test.run ^$") && !strings.HasPrefix(p.Cmdline, "drill") {
			out = append(out, p)
		}
	}
	return out
}

func readFile(path string) string {
	b, _ := os.ReadFile(filepath.Clean(path))
	return string(b)
}
