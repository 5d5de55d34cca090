package proctree

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in   string
		want Proc
	}{
		{"42 (postgres) S 1 42 42 0 -1", Proc{PID: 42, PPID: 1, PGID: 42, State: 'S', Comm: "postgres"}},
		{"7 (a (b) c) T 3 5 5 0", Proc{PID: 7, PPID: 3, PGID: 5, State: 'T', Comm: "a (b) c"}},
		{"981 (postgres) S 980 980 980 0 -1 4194560 1202 0 0 0 0 0 0 0 20 0 1 0 123456 221184000 6816",
			Proc{PID: 981, PPID: 980, PGID: 980, State: 'S', Comm: "postgres", Start: 123456}},
	}
	for _, tc := range tests {
		got, err := parseStat(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Error("parseStat accepted garbage")
	}
}

// TestStopFollowsNewSessions checks that a child that left the group with
// setsid is stopped and continued too.
func TestStopFollowsNewSessions(t *testing.T) {
	// sh (group leader) starts a sleeper in its own session.
	cmd := exec.Command("sh", "-c", "setsid sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() {
		tree, _ := Tree(pgid)
		Kill(pgid, tree)
		_ = cmd.Wait()
	}()
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); len(tree) < 2; {
		tree, _ = Tree(pgid)
		if time.Now().After(deadline) {
			t.Fatalf("sleeper never appeared: %v", tree)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped, err := Stop(pgid)
	if err != nil || len(stopped) < 2 {
		t.Fatalf("Stop = %v, %v", stopped, err)
	}
	waitState := func(want byte) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			ok := true
			for _, pid := range stopped {
				if p, err := Read(pid); err == nil && (p.State == 'T') != (want == 'T') {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("processes %v never reached state %c", stopped, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitState('T')
	if err := Cont(pgid, stopped); err != nil {
		t.Fatal(err)
	}
	waitState('S')
	if !Alive(os.Getpid()) {
		t.Fatal("Alive(self) = false")
	}
}

// TestContIDsAfterLeaderDied: a stopped tree whose leader is killed leaves
// its child (own session, re-parented) stopped; ContIDs continues it from
// its journaled ID, and leaves alone an ID whose start time differs (a
// reused PID).
func TestContIDsAfterLeaderDied(t *testing.T) {
	cmd := exec.Command("sh", "-c", "setsid sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	var ids []ID
	t.Cleanup(func() {
		tree, _ := Tree(pgid)
		for _, id := range ids {
			if Same(id) {
				tree = append(tree, id.PID)
			}
		}
		Kill(pgid, tree)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); len(ids) < 2; {
		ids, _ = TreeIDs(pgid)
		if time.Now().After(deadline) {
			t.Fatalf("sleeper never appeared: %v", ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range ids {
		if id.Start == 0 || !Same(id) {
			t.Fatalf("ID %+v: no start time or not Same", id)
		}
	}
	if _, err := Stop(pgid); err != nil {
		t.Fatal(err)
	}
	var child ID
	for _, id := range ids {
		if id.PID != pgid {
			child = id
		}
	}
	stateIs := func(pid int, want byte) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if p, err := Read(pid); err == nil && (p.State == 'T') == (want == 'T') {
				return true
			}
		}
		return false
	}
	if !stateIs(child.PID, 'T') {
		t.Fatal("child not stopped")
	}
	// The leader dies (SIGKILL ends a stopped process too).
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	_ = cmd.Wait()
	if tree, _ := Tree(pgid); len(tree) != 0 {
		t.Fatalf("group %d still has %v after its leader died", pgid, tree)
	}
	// A reused PID (other start time) is not signalled.
	if done, err := ContIDs(pgid, []ID{{PID: child.PID, Start: child.Start + 1}}); err != nil || len(done) != 0 {
		t.Fatalf("ContIDs with a wrong start time continued %v (%v)", done, err)
	}
	if !stateIs(child.PID, 'T') {
		t.Fatal("child continued through a wrong start time")
	}
	done, err := ContIDs(pgid, ids)
	if err != nil || len(done) != 1 || done[0] != child {
		t.Fatalf("ContIDs = %v, %v; want only the child %+v", done, err, child)
	}
	if !stateIs(child.PID, 'S') {
		t.Fatal("child still stopped after ContIDs")
	}
}

// TestTreeRefusesMachineWideGroups guards against signalling every process
// on the machine: the tree of group 0 or 1 must be empty, and Kill/Cont with
// such a group touch only the explicit pids.
func TestTreeRefusesMachineWideGroups(t *testing.T) {
	for _, pgid := range []int{-1, 0, 1} {
		pids, err := Tree(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) != 0 {
			t.Fatalf("Tree(%d) = %d processes, want none", pgid, len(pids))
		}
		ids, err := TreeIDs(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 0 {
			t.Fatalf("TreeIDs(%d) = %d processes, want none", pgid, len(ids))
		}
	}
}
