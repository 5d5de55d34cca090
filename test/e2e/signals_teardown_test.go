package e2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/record"
)

// TestSignalStopsLoadBeforeServices interrupts a drill under steady load
// (200 orders/s on two order-gateway replicas, no fault) with SIGTERM and
// with Ctrl-C (SIGINT). drill must stop the load first, then the faults,
// then the services: no request may meet a stopping replica (no 502, 503
// or transport error in run.json), no replica may leave routing before the
// reports are written, the window that ended before the interrupt is
// judged (PASS), and the run window it cut short is ABORTED, not FAIL.
func TestSignalStopsLoadBeforeServices(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, _ := binaries(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCase(t)
			t.Cleanup(func() { killProcesses(c) })
			scenario := c.writeScenario(t, "steady-load.yaml.tmpl", map[string]string{"Name": "teardown"})
			p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
			p.waitLine(`msg="stream started"`)
			// Past the early window [1s, 3s), well before the end at 40 s.
			time.Sleep(5 * time.Second)
			p.signal(sig)
			if code, _ := p.exit(); code != exitCouldNot {
				t.Fatalf("drill run exit code %d after %v, want %d", code, sig, exitCouldNot)
			}
			requireNoProcesses(t, c)

			rec, err := record.Load(filepath.Join(c.Out, "run.json"))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Aborted == "" || rec.ExitCode != exitCouldNot {
				t.Fatalf("run.json: aborted %q, exit %d; want the interrupt and %d", rec.Aborted, rec.ExitCode, exitCouldNot)
			}
			var requests int64
			for _, b := range rec.Series["orders"].Buckets {
				requests += b.Requests
				for code, n := range b.Codes {
					if code >= 500 && n > 0 {
						t.Errorf("t=%s: %d responses %d; want none (a replica stopped while load still ran)", b.Start, n, code)
					}
				}
				for kind, n := range b.Errors {
					if n > 0 {
						t.Errorf("t=%s: %d requests failed (%s); want none", b.Start, n, kind)
					}
				}
			}
			if requests < 500 {
				t.Fatalf("only %d requests recorded; the interrupt came too early for this test", requests)
			}
			for _, e := range rec.Events {
				switch e.Kind {
				case event.EndpointRemoved, event.EndpointNotReady, event.PodUnready:
					t.Errorf("event %s %s at t=%s (%s): a replica left routing before the run's reports were written", e.Kind, e.Pod, e.At, e.Detail)
				}
			}
			verdicts := map[string]assert.Verdict{}
			for _, r := range rec.Results {
				verdicts[r.Name] = r.Verdict
			}
			if verdicts["no-errors-early"] != assert.Pass || verdicts["no-errors"] != assert.Aborted {
				t.Errorf("verdicts %v; want no-errors-early pass (its window ended before the interrupt) and no-errors aborted (cut short)", verdicts)
			}
		})
	}
}
