package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/record"
)

// journalSeconds counts the closed seconds in the run journal under dir.
func journalSeconds(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, record.JournalFile))
	return bytes.Count(b, []byte(`{"kind":"second"`))
}

// waitJournalSeconds waits (bounded) until the run journal under c.Out
// holds n closed seconds: load is under way.
func waitJournalSeconds(t *testing.T, c *caseEnv, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for journalSeconds(c.Out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the journal held %d seconds after %s", journalSeconds(c.Out), wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSIGKILLedRunIsReportable: drill run is killed with SIGKILL in the
// middle of its load (once its journal holds at least 5 closed seconds);
// the report directory then holds those seconds, and drill report over the
// directory writes an ABORTED report (exit 3) from them: the window that
// ended before the kill judged (pass), the ones that did not aborted,
// every second the journal held in run.json, findings computed (this
// scenario, without faults or services, has none to report).
func TestSIGKILLedRunIsReportable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process for about 15 seconds")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	scenario := c.writeScenario(t, "stub-load.yaml.tmpl", map[string]string{"Name": "sigkill-journal"})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	waitJournalSeconds(t, c, 5)
	p.signal(syscall.SIGKILL)
	if code, sig := p.exit(); sig != syscall.SIGKILL {
		t.Fatalf("drill exited %d, not killed", code)
	}
	measured := journalSeconds(c.Out)
	if _, err := os.Stat(filepath.Join(c.Out, "run.json")); err == nil {
		t.Fatal("a killed run wrote run.json")
	}

	code, out := runDrill(t, c, drill, "report", c.Out)
	if code != exitCouldNot {
		t.Fatalf("drill report exited %d, want %d\n%s", code, exitCouldNot, out)
	}
	if !strings.Contains(out, "ABORTED") {
		t.Fatalf("summary does not say ABORTED:\n%s", out)
	}
	readReports(t, c.Out)
	rec, err := record.Load(filepath.Join(c.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Recovered || rec.ExitCode != exitCouldNot {
		t.Fatalf("run.json: recovered=%v exit=%d", rec.Recovered, rec.ExitCode)
	}
	s := rec.Series["orders"]
	if s == nil || len(s.Buckets) != measured {
		t.Fatalf("run.json holds %v seconds, the journal %d", s, measured)
	}
	var requests int64
	for i, b := range s.Buckets {
		if b.Start != time.Duration(i)*time.Second {
			t.Fatalf("second %d starts at %s", i, b.Start)
		}
		requests += b.Requests
	}
	if min := int64(measured-1) * 90; requests < min {
		t.Fatalf("%d requests in %d seconds at 100/s", requests, measured)
	}
	verdicts := map[string]assert.Verdict{}
	for _, r := range rec.Results {
		verdicts[r.Name] = r.Verdict
	}
	if verdicts["no-errors-early"] != assert.Pass || verdicts["no-errors-late"] != assert.Aborted {
		t.Fatalf("verdicts %v, want early pass and late aborted", verdicts)
	}
	if rec.FindingsSchema == "" {
		t.Fatal("findings were not computed")
	}
	// drill report DIR/run.json reads the rebuilt record again.
	if code, out := runDrill(t, c, drill, "report", filepath.Join(c.Out, "run.json")); code != exitCouldNot {
		t.Fatalf("second drill report exited %d\n%s", code, out)
	}
}
