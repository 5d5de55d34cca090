package inject

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/proctree"
)

// TestCleanupEndsStandIn: a journaled stand-in still running (its run
// died and it did not notice) is ended by Cleanup, which says so; a
// second Cleanup has nothing left to do; one already gone is reported
// gone.
func TestCleanupEndsStandIn(t *testing.T) {
	state := t.TempDir()
	run := NewRunID(time.Now())
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-reaped })
	ids := proctree.IDs([]int{cmd.Process.Pid})
	if len(ids) != 1 {
		t.Fatalf("no id for pid %d", cmd.Process.Pid)
	}
	j, err := OpenJournal(state, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(StandInEntry(OpApply, "toxiproxy", ids[0])); err != nil {
		t.Fatal(err)
	}
	// A stand-in that ended with its run: same kind, a process long gone.
	if err := j.Record(StandInEntry(OpApply, "stubs", proctree.ID{PID: ids[0].PID, Start: ids[0].Start + 1})); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()

	rep, err := Cleanup(context.Background(), CleanupOptions{StateDir: state, RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	<-reaped
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].String(), "stand-in process toxiproxy: ended pid") {
		t.Fatalf("removed %v, want the toxiproxy stand-in ended", rep.Removed)
	}
	if len(rep.Gone) != 1 || rep.Gone[0].String() != "stand-in process stubs" {
		t.Fatalf("gone %v, want the stubs stand-in", rep.Gone)
	}
	rep, err = Cleanup(context.Background(), CleanupOptions{StateDir: state, RunID: run})
	if err != nil || len(rep.Removed)+len(rep.Gone)+len(rep.Failed) != 0 {
		t.Fatalf("second cleanup: %+v, %v; want nothing left", rep, err)
	}
}

// runOwned wraps a Toxiproxy as the runner wraps its own stand-in.
type runOwned struct{ Toxiproxy }

func (runOwned) EndsWithRun() bool { return true }

// TestRunOwnedIsEmbedded: a Toxiproxy that ends with its run (the
// runner's wrapper of its stand-in) journals its entries as embedded, so
// cleanup after a SIGKILL takes its unreachable API as the proxies gone;
// a remote one does not.
func TestRunOwnedIsEmbedded(t *testing.T) {
	remote := NewRemote("http://127.0.0.1:1")
	if !isEmbedded(runOwned{remote}) || isEmbedded(remote) {
		t.Errorf("isEmbedded(run-owned) = %t, isEmbedded(remote) = %t; want true, false", isEmbedded(runOwned{remote}), isEmbedded(remote))
	}
}
