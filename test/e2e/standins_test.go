package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/record"
)

// standIns lists the stand-in processes of a case (their argv[0] is
// drill-standin-<role>).
func standIns(c *caseEnv) []proc {
	var out []proc
	for _, p := range processesOf(c) {
		if strings.HasPrefix(p.Cmdline, "drill-standin-") {
			out = append(out, p)
		}
	}
	return out
}

// TestSIGKILLLeavesNoStandIn: drill run is killed with SIGKILL while its
// stand-ins (Toxiproxy, the stubs, a Service's listener) serve; each ends
// by itself (its stdin closed with drill), and drill cleanup then finds
// each journaled stand-in gone and says so.
func TestSIGKILLLeavesNoStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process for a few seconds")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	t.Cleanup(func() { killProcesses(c) })
	scenario := c.writeScenario(t, "standins.yaml.tmpl", map[string]string{"Name": "standins"})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	waitJournalSeconds(t, c, 2)
	roles := map[string]bool{}
	for _, s := range standIns(c) {
		roles[strings.Fields(s.Cmdline)[0]] = true
	}
	for _, want := range []string{"drill-standin-toxiproxy", "drill-standin-stubs", "drill-standin-service"} {
		if !roles[want] {
			t.Fatalf("no %s process while the run serves; stand-ins: %v\n%s", want, roles, joinProcs(processesOf(c)))
		}
	}
	p.signal(syscall.SIGKILL)
	if _, sig := p.exit(); sig != syscall.SIGKILL {
		t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
	}
	if !eventually(20*time.Second, func() bool { return len(standIns(c)) == 0 }) {
		t.Fatalf("stand-ins outlived their SIGKILLed drill by 20 s:\n%s", joinProcs(standIns(c)))
	}
	code, out := runDrill(t, c, drill, "cleanup", "--state-dir", c.State, "--run", c.RunID)
	if code != 0 {
		t.Fatalf("drill cleanup exited %d\n%s", code, out)
	}
	t.Logf("drill cleanup after the SIGKILL:\n%s", out)
	for _, name := range []string{"toxiproxy", "stubs", "service idle"} {
		if !strings.Contains(out, "gone     stand-in process "+name+" (run "+c.RunID+")") {
			t.Errorf("drill cleanup does not say stand-in %s is gone:\n%s", name, out)
		}
	}
}

// TestStandInDeathInvalidatesRun: the run's Toxiproxy stand-in is killed
// mid-run (SIGKILL, as the OOM killer would); drill goes on, then says the
// measurement is INVALID naming the stand-in (exit 4), and its cleanup is
// verified: a dead Toxiproxy holds no proxy, and no stand-in is left for
// drill cleanup.
func TestStandInDeathInvalidatesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process for about 15 s")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	t.Cleanup(func() { killProcesses(c) })
	scenario := c.writeScenario(t, "standin-dies.yaml.tmpl", map[string]string{"Name": "standin-dies"})
	p := startDrill(t, c, drill, "run", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	waitJournalSeconds(t, c, 2)
	killed := 0
	for _, s := range standIns(c) {
		if strings.HasPrefix(s.Cmdline, "drill-standin-toxiproxy") {
			if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d Toxiproxy stand-ins, want 1; processes:\n%s", killed, joinProcs(processesOf(c)))
	}
	if code, sig := p.exit(); code != 4 {
		t.Fatalf("drill exited %d (signal %v), want 4 (INVALID)", code, sig)
	}
	rec, err := record.Load(filepath.Join(c.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, pr := range rec.Validity.Problems {
		named = named || strings.Contains(pr, "stand-in toxiproxy") && strings.Contains(pr, "ended before drill stopped it")
	}
	if !named {
		t.Errorf("validity problems do not name the dead stand-in: %q", rec.Validity.Problems)
	}
	if !rec.Cleanup.Verified {
		t.Errorf("cleanup not verified: %+v", rec.Cleanup)
	}
	code, out := runDrill(t, c, drill, "cleanup", "--state-dir", c.State, "--run", c.RunID)
	if code != 0 || strings.Contains(out, "ended pid") {
		t.Errorf("drill cleanup after the run exited %d, want 0 with nothing to end:\n%s", code, out)
	}
}
