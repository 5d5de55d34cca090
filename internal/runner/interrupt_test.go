package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/drillhq/drill/internal/exitcode"
)

// TestRunSecondInterruptKeepsReports interrupts a run twice while its
// fault is on (the graceful context, then Hard, as two Ctrl-Cs do): the
// fault is reverted, cleanup verified, and the reports are still written
// (exit 3).
func TestRunSecondInterruptKeepsReports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a drill")
	}
	var log logBuffer
	opts := runOptions(t, loadScenario(t, "stub-latency.yaml"), &bytes.Buffer{})
	opts.Logger = log.logger()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	opts.Hard = hard
	done := startRun(ctx, opts)
	log.waitFor(t, `msg="fault on"`)
	cancel(errors.New("interrupted by test"))
	cancelHard()
	r := awaitRun(t, done)

	if r.res.Code != exitcode.CouldNotRun {
		t.Fatalf("code %d, err %v; want 3", r.res.Code, r.err)
	}
	if r.res.Record == nil || !r.res.Record.Cleanup.Verified {
		t.Fatalf("record %v; want one with cleanup verified", r.res.Record)
	}
	for _, f := range []string{"run.json", "junit.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(opts.OutDir, f)); err != nil {
			t.Errorf("report %s after a second interrupt: %v", f, err)
		}
	}
	if r.res.OutDir != opts.OutDir {
		t.Errorf("Result.OutDir %q, want %q", r.res.OutDir, opts.OutDir)
	}
}
