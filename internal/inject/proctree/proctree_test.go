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
