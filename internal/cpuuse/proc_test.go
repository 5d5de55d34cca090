package cpuuse

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a child process: "busy" spins forever;
// "parent" starts a busy child of its own, prints its pid and waits.
const childEnv = "DRILL_CPUUSE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "busy":
		//lint:ignore SA5002 the child exists to keep one CPU busy until killed
		for {
		}
	case "parent":
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=busy")
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		_ = cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseProcStat(t *testing.T) {
	tail := " 0 0 -1 4194560 100 0 0 0 %s 20 0 1 0 %s 1000 10"
	line := func(head, times, start string) string {
		return head + strings.Replace(strings.Replace(tail, "%s", times, 1), "%s", start, 1)
	}
	tests := []struct {
		name    string
		in      string
		want    procStat
		wantErr bool
	}{
		{"plain", line("42 (postgres) S 7 42", "150 50 30 20", "987654"),
			procStat{pid: 42, ppid: 7, state: 'S', own: 200, children: 50, start: 987654}, false},
		{"comm with spaces and parentheses", line("43 (a) b (c) R 1 43", "1 2 3 4", "5"),
			procStat{pid: 43, ppid: 1, state: 'R', own: 3, children: 7, start: 5}, false},
		{"zombie", line("44 (drill) Z 1 44", "7 3 0 0", "9"),
			procStat{pid: 44, ppid: 1, state: 'Z', own: 10, start: 9}, false},
		{"no parentheses", "45 drill S 1 45", procStat{}, true},
		{"too short", "46 (drill) S 1 46 0 0", procStat{}, true},
		{"not a number", line("47 (drill) S 1 47", "x 2 3 4", "5"), procStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseProcStat(%q) error %v, want error %t", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseProcStat(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMachineStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    machineStat
		wantErr bool
	}{
		{"two cores with steal", "cpu  100 5 40 800 20 3 2 10 0 0\ncpu0 50 2 20 400 10 1 1 5 0 0\ncpu1 50 3 20 400 10 2 1 5 0 0\nintr 1 2 3\n",
			machineStat{cores: 2, busy: 100 + 5 + 40 + 3 + 2 + 10, idle: 820, steal: 10}, false},
		{"old kernel, 8 fields", "cpu 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n",
			machineStat{cores: 1, busy: 1 + 2 + 3 + 6 + 7 + 8, idle: 9, steal: 8}, false},
		{"no cpu line", "intr 1\n", machineStat{}, true},
		{"short cpu line", "cpu 1 2 3\n", machineStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMachineStat(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %t", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStartNeedsProc(t *testing.T) {
	_, err := Start(context.Background(), Options{Now: func() time.Duration { return 0 }, ProcRoot: t.TempDir()})
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start over an empty /proc: error %v, want one wrapping os.ErrNotExist", err)
	}
}

// startChild starts the test binary in mode and reaps it at the end.
func startChild(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(pipe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, out
}

// TestSamplerRealProcesses measures real busy processes: a replica-like
// parent whose CPU is all in its busy child (a process tree), a second
// busy process, and drill itself. Each part's CPU must be its own tree's,
// and a part whose process exits keeps the CPU it used.
func TestSamplerRealProcesses(t *testing.T) {
	parent, out := startChild(t, "parent")
	busy, _ := startChild(t, "busy")

	// The grandchild's pid, once the parent has printed it.
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("the parent child did not print its child's pid: %v", err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)

	start := time.Now()
	s, err := Start(context.Background(), Options{
		Interval: 100 * time.Millisecond,
		Now:      func() time.Duration { return time.Since(start) },
		Parts: []Part{
			{Name: "drill", Kind: KindDrill, Self: true},
			{Name: "tree replicas", Kind: KindService, PIDs: func() []int { return []int{parent.Process.Pid} }},
			{Name: "busy", Kind: KindDependency, PIDs: func() []int { return []int{busy.Process.Pid} }},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Wait (generously: the machine is shared) until both busy processes
	// have used 0.3 s of CPU since the sampler started.
	const want = 30 // ticks
	for {
		if time.Now().After(deadline.Add(60 * time.Second)) {
			t.Fatal("the busy children did not get 0.3 s of CPU in two minutes")
		}
		if err := s.sample(); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		last := s.samples[len(s.samples)-1]
		s.mu.Unlock()
		if last.parts[1] >= want && last.parts[2] >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The last sample of the busy process before it exits; read it again
	// after the sample: the part must hold its own process alone.
	if err := s.sample(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	before := s.samples[len(s.samples)-1].parts[2]
	s.mu.Unlock()
	direct, err := readProc("/proc", busy.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if before > direct.own+direct.children {
		t.Errorf("the busy part holds %d ticks, more than its process's own %d: another tree was counted in it", before, direct.own+direct.children)
	}
	_ = syscall.Kill(busy.Process.Pid, syscall.SIGKILL)
	_ = busy.Wait()

	u := s.Stop()
	if u.Cores < 1 || u.CapacitySeconds <= 0 || u.Busy <= 0 {
		t.Errorf("machine figures: cores %d, capacity %.2f s, busy %.3f; want all above 0", u.Cores, u.CapacitySeconds, u.Busy)
	}
	if len(u.Parts) != 3 {
		t.Fatalf("parts %+v, want 3", u.Parts)
	}
	tree, dep := u.Parts[1], u.Parts[2]
	if tree.Seconds < 0.3 || tree.Processes != 1 {
		t.Errorf("tree replicas: %.2f s over %d roots; want >= 0.3 s (its busy child's) over 1 root", tree.Seconds, tree.Processes)
	}
	if g, err := readProc("/proc", grandchild); err == nil && g.ppid != parent.Process.Pid {
		t.Errorf("grandchild %d has parent %d, want %d", grandchild, g.ppid, parent.Process.Pid)
	}
	if dep.Seconds < float64(before)/TicksPerSecond {
		t.Errorf("busy: %.2f s after it exited, want at least the %.2f s sampled while it ran", dep.Seconds, float64(before)/TicksPerSecond)
	}
	if tree.Share <= 0 || tree.Share > u.Busy+0.05 || dep.Share <= 0 {
		t.Errorf("shares: tree %.3f, busy %.3f, machine busy %.3f; want parts above 0 and within the machine's busy share", tree.Share, dep.Share, u.Busy)
	}
	if len(u.Seconds) == 0 || len(u.Seconds[0].Parts) != 3 {
		t.Errorf("per-second samples: %+v", u.Seconds)
	}
	if again := s.Stop(); again != u {
		t.Error("a second Stop returned another usage")
	}
}
