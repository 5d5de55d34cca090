package inject

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/placement"
)

// TestCleanupRemovesCgroup: a run killed with SIGKILL leaves its cgroup
// (journaled before it was made) with the processes that were in it dead;
// drill cleanup removes it and records that, a second cleanup finds nothing,
// and VerifyRun never counts the cgroup as a fault still active.
func TestCleanupRemovesCgroup(t *testing.T) {
	state := t.TempDir()
	run := NewRunID(time.Now())
	j, err := OpenJournal(state, run)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := placement.Setup(placement.Config{RunID: run, Lower: true, Journal: func(dir string) error {
		return j.Record(Entry{Op: OpApply, Key: "cgroup", Kind: KindCgroup, Cgroup: dir})
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := pl.Cgroup()
	if dir == "" {
		t.Skipf("no writable cgroup with the cpu controller here: %s", pl.Report().NoCgroup)
	}
	t.Cleanup(func() { _, _ = placement.Remove(dir) })
	g, err := pl.Replica("app", "app-0")
	if err != nil {
		t.Fatal(err)
	}
	// A replica in the cgroup, started as the runtime starts it.
	cmd := exec.Command("sleep", "30")
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		leave, err := g.EnterThread()
		if err == nil {
			g.Prepare(cmd)
			err = cmd.Start()
			if leave() == nil {
				runtime.UnlockOSThread()
			}
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if left, err := VerifyRun(context.Background(), nil, run, j); err != nil || len(left) != 0 {
		t.Errorf("VerifyRun with the cgroup in place = %v, %v; want nothing (the cgroup is no fault)", left, err)
	}
	// The run dies: its replica is killed (parent-death signal), nobody
	// removes the cgroup.
	_ = cmd.Process.Kill()
	_, _ = cmd.Process.Wait()
	_ = j.Close()

	rep, err := Cleanup(context.Background(), CleanupOptions{StateDir: state, RunID: run})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].Kind != KindCgroup || rep.Removed[0].String() != "cgroup "+dir {
		t.Fatalf("cleanup = %+v, %v; want the cgroup removed", rep, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after cleanup (%v)", dir, err)
	}
	rep, err = Cleanup(context.Background(), CleanupOptions{StateDir: state, RunID: run})
	if err != nil || len(rep.Removed)+len(rep.Gone)+len(rep.Failed) != 0 {
		t.Errorf("second cleanup = %+v, %v; want nothing left to do", rep, err)
	}
}
