package placement

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

// runID is a run id unique to this test process and test.
func runID(t *testing.T) string {
	return fmt.Sprintf("test%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
}

// startIn starts cmd into g as the runtime's spawner does: from a locked
// OS thread that entered g and ends with its goroutine.
func startIn(t *testing.T, g *Group, cmd *exec.Cmd) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		leave, err := g.EnterThread()
		if err != nil {
			errc <- err
			return
		}
		g.Prepare(cmd)
		errc <- cmd.Start()
		if leave() == nil { // else the thread ends with this goroutine
			runtime.UnlockOSThread()
		}
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kill(cmd) })
}

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	}
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (field 3 first).
func statFields(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// niceOf is field 19 of /proc/<pid>/stat.
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	n, err := strconv.Atoi(statFields(t, pid)[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cpuTicks is utime+stime (fields 14 and 15) of /proc/<pid>/stat.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	f := statFields(t, pid)
	u, err1 := strconv.ParseInt(f[14-3], 10, 64)
	s, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return u + s
}

// cgroupOf is pid's path in the hierarchy with the cpu controller (v1), or
// its v2 path.
func cgroupOf(t *testing.T, pid int, v2 bool) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (v2 && parts[1] == "") || (!v2 && containsWord(parts[1], "cpu")) {
			return parts[2]
		}
	}
	t.Fatalf("no cpu cgroup in %s", b)
	return ""
}

func containsWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// setupCgroup makes a real cgroup placement or skips the test with the
// reason drill may not make one here.
func setupCgroup(t *testing.T, cfg Config) *Placement {
	t.Helper()
	p, err := Setup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cgroup() == "" {
		t.Skipf("no writable cgroup with the cpu controller here: %s (the nice path is tested by TestNiceFallback)", p.Report().NoCgroup)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestNiceFallback: without a writable cgroup the system under test runs at
// nice +5, whether started from a thread that entered the group or adopted
// after it started (with a child it forked), and CPU limits are reported
// as not applied.
func TestNiceFallback(t *testing.T) {
	p, err := Setup(Config{RunID: runID(t), Lower: true, NoCgroup: "cgroups switched off by the test",
		Limits: map[string]scenario.CPUQuantity{"app": 200}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode() != ModeNice || p.Cgroup() != "" {
		t.Fatalf("mode %s, cgroup %q; want nice and none", p.Mode(), p.Cgroup())
	}
	g, err := p.Replica("app", "app-0")
	if err != nil {
		t.Fatal(err)
	}
	replica := exec.Command("sleep", "30")
	startIn(t, g, replica)
	if n := niceOf(t, replica.Process.Pid); n != SUTNice {
		t.Errorf("replica's nice = %d, want %d", n, SUTNice)
	}

	deps, err := p.Deps()
	if err != nil {
		t.Fatal(err)
	}
	dep := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	dep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := dep.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-dep.Process.Pid, syscall.SIGKILL); _, _ = dep.Process.Wait() })
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	if err := deps.Adopt(dep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{dep.Process.Pid, child} {
		if n := niceOf(t, pid); n != SUTNice {
			t.Errorf("adopted process %d: nice = %d, want %d", pid, n, SUTNice)
		}
	}

	rep := p.Report()
	if !strings.Contains(rep.Line, "nice +5 (no writable cgroup: cgroups switched off by the test)") ||
		!strings.Contains(rep.Line, "CPU limits not applied (app 200m)") || len(rep.Limits) != 1 || rep.Limits[0].Applied {
		t.Errorf("report %+v", rep)
	}
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], "CPU limits not applied to app (200m)") {
		t.Errorf("warnings %q", w)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSameLeavesProcessesAlone: sutPriority same without limits places
// nothing.
func TestSameLeavesProcessesAlone(t *testing.T) {
	p, err := Setup(Config{RunID: runID(t)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Replica("app", "app-0")
	if err != nil || g != nil || p.Mode() != ModeSame || p.Cgroup() != "" {
		t.Fatalf("group %v, %v, mode %s, cgroup %q", g, err, p.Mode(), p.Cgroup())
	}
	if l := p.Report().Line; !strings.Contains(l, "drill's own CPU weight") {
		t.Errorf("line %q", l)
	}
}

// TestCgroupPlacement: the run's cgroup is journaled before it exists, has
// the lower weight, holds a replica started from a thread that entered its
// pod's cgroup and a dependency adopted after it started (with the child it
// forked), and is gone after Close.
func TestCgroupPlacement(t *testing.T) {
	var journaled string
	p := setupCgroup(t, Config{RunID: runID(t), Lower: true, Journal: func(dir string) error {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s exists when it is journaled (%v)", dir, err)
		}
		journaled = dir
		return nil
	}})
	top := p.Cgroup()
	if journaled != top || filepath.Base(top) != Prefix+runID(t) {
		t.Fatalf("journaled %q, cgroup %q", journaled, top)
	}
	v2 := p.Mode() == ModeCgroupV2
	weightFile, want := "cpu.shares", strconv.Itoa(SUTShares())
	if v2 {
		weightFile, want = "cpu.weight", strconv.Itoa(SUTWeight)
	}
	if b, err := os.ReadFile(filepath.Join(top, weightFile)); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q, %v; want %s", weightFile, b, err, want)
	}

	g, err := p.Replica("app", "app-0")
	if err != nil {
		t.Fatal(err)
	}
	replica := exec.Command("sleep", "30")
	startIn(t, g, replica)
	rel := "/" + filepath.Base(top)
	if got := cgroupOf(t, replica.Process.Pid, v2); !strings.HasSuffix(got, rel+"/app/app-0") {
		t.Errorf("replica in cgroup %q, want ...%s/app/app-0", got, rel)
	}
	if n := niceOf(t, replica.Process.Pid); n != 0 {
		t.Errorf("replica's nice = %d, want 0 (the cgroup gives the weight)", n)
	}

	deps, err := p.Deps()
	if err != nil {
		t.Fatal(err)
	}
	dep := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	dep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := dep.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	deps.Prepare(dep)
	if err := dep.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	if err := deps.Adopt(dep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{dep.Process.Pid, child} {
		if got := cgroupOf(t, pid, v2); !strings.HasSuffix(got, rel+"/"+DepsGroup) {
			t.Errorf("dependency process %d in cgroup %q, want ...%s/%s", pid, got, rel, DepsGroup)
		}
	}
	if l := p.Report().Line; !strings.Contains(l, "replicas and dependencies in cgroup "+filepath.Base(top)+" ("+weightFile+" "+want+" vs drill ") {
		t.Errorf("line %q", l)
	}

	kill(replica)
	_ = syscall.Kill(-dep.Process.Pid, syscall.SIGKILL)
	_, _ = dep.Process.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after Close (%v)", top, err)
	}
}

// TestCgroupQuota: a busy replica of a service limited to 200m uses well
// under one core over a couple of seconds, as a CFS quota makes it.
func TestCgroupQuota(t *testing.T) {
	p := setupCgroup(t, Config{RunID: runID(t), Limits: map[string]scenario.CPUQuantity{"busy": 200}})
	g, err := p.Replica("busy", "busy-0")
	if err != nil {
		t.Fatal(err)
	}
	quotaFile, want := "cpu.cfs_quota_us", "20000"
	if p.Mode() == ModeCgroupV2 {
		quotaFile, want = "cpu.max", "20000 100000"
	}
	if b, err := os.ReadFile(filepath.Join(g.Dir(), quotaFile)); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q, %v; want %s", quotaFile, b, err, want)
	}
	busy := exec.Command("sh", "-c", "while :; do :; done")
	startIn(t, g, busy)
	pid := busy.Process.Pid
	const hz = 100 // USER_HZ on Linux
	start, t0 := cpuTicks(t, pid), time.Now()
	time.Sleep(2 * time.Second)
	used, wall := cpuTicks(t, pid)-start, time.Since(t0)
	share := float64(used) / hz / wall.Seconds()
	t.Logf("busy replica limited to 200m used %.2f of a core over %s", share, wall.Round(time.Millisecond))
	if share >= 0.6 {
		t.Errorf("busy replica used %.2f of a core over %s, want < 0.6 under a 200m limit", share, wall)
	}
	if l := p.Report().Line; !strings.Contains(l, "busy limited to 0.2 CPU per replica (CFS quota 20000 µs per 100000 µs)") {
		t.Errorf("line %q", l)
	}
	kill(busy)
}

// TestRemoveLeftover: a cgroup left by a run that died (never closed, its
// process killed) is removed by Remove, as `drill cleanup` does; a second
// Remove finds it gone; Remove refuses what is not a drill run's cgroup.
func TestRemoveLeftover(t *testing.T) {
	p, err := Setup(Config{RunID: runID(t), Lower: true})
	if err != nil {
		t.Fatal(err)
	}
	top := p.Cgroup()
	if top == "" {
		t.Skipf("no writable cgroup with the cpu controller here: %s", p.Report().NoCgroup)
	}
	g, err := p.Replica("app", "app-0")
	if err != nil {
		t.Fatal(err)
	}
	replica := exec.Command("sleep", "30")
	startIn(t, g, replica)
	kill(replica) // the run died; nobody closed p
	if gone, err := Remove(top); err != nil || gone {
		t.Fatalf("Remove = %v, %v; want removed", gone, err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there (%v)", top, err)
	}
	if gone, err := Remove(top); err != nil || !gone {
		t.Errorf("second Remove = %v, %v; want gone", gone, err)
	}
	notCgroup := filepath.Join(t.TempDir(), Prefix+"x")
	if err := os.Mkdir(notCgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{notCgroup, filepath.Join(filepath.Dir(top), "other"), "relative/" + Prefix + "x"} {
		if _, err := Remove(dir); err == nil {
			t.Errorf("Remove(%s) succeeded; want it refused", dir)
		}
	}
	if _, err := os.Stat(notCgroup); err != nil {
		t.Errorf("Remove touched %s: %v", notCgroup, err)
	}
	_ = p.Close()
}

// TestQuota: the kubelet's quota over a 100 ms period, at least 1 ms.
func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		cpu  string
		want time.Duration
	}{
		{"500m", 50 * time.Millisecond}, {"1", 100 * time.Millisecond}, {"1.5", 150 * time.Millisecond},
		{"0.25", 25 * time.Millisecond}, {"5m", time.Millisecond}, {"1m", time.Millisecond}, {"2", 200 * time.Millisecond},
	} {
		q, err := scenario.ParseCPUQuantity(tc.cpu)
		if err != nil {
			t.Fatal(err)
		}
		if got := Quota(q); got != tc.want {
			t.Errorf("Quota(%s) = %s, want %s", tc.cpu, got, tc.want)
		}
	}
}
