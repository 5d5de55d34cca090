package localenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/netport"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// These tests pin the kubelet's timing rules the local runtime mirrors
// against a fake clock: each event is stamped with the fake time at which
// it was emitted, and the clock only moves when the test moves it, so the
// times checked are exact whatever the load on the machine.

// fakeRun is one replica under a fake clock.
type fakeRun struct {
	t   *testing.T
	clk *fakeClock
	t0  time.Time
	r   *Replica

	mu  sync.Mutex
	evs []event.Event
}

// startFake starts a replica with cfg under a fake clock (the kubelet's
// default back-off unless cfg sets one) and stops it at the end of the
// test.
func startFake(t *testing.T, cfg ReplicaConfig) *fakeRun {
	t.Helper()
	f := &fakeRun{t: t, t0: time.Unix(1_000_000, 0)}
	f.clk = newFakeClock(f.t0)
	cfg.Options.clk = f.clk
	cfg.Clock = event.NewClock()
	cfg.Sink = event.SinkFunc(func(e event.Event) {
		f.mu.Lock()
		e.At = f.clk.Now().Sub(f.t0)
		f.evs = append(f.evs, e)
		f.mu.Unlock()
	})
	if cfg.Service == "" {
		cfg.Service = "svc"
	}
	if cfg.Pod == "" {
		cfg.Pod = "svc-0"
	}
	r, err := NewReplica(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.r = r
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return f
}

func (f *fakeRun) events() []event.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event.Event(nil), f.evs...)
}

// at moves the fake clock to t0+d.
func (f *fakeRun) at(d time.Duration) { f.clk.advanceTo(f.t0.Add(d)) }

// wait waits (real time, generous) until n events satisfy pred.
func (f *fakeRun) wait(what string, n int, pred func(event.Event) bool) {
	f.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		if count(f.events(), pred) >= n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %d %s; events:\n%s", n, what, f.dump())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeRun) dump() string {
	var b strings.Builder
	for _, e := range f.events() {
		fmt.Fprintf(&b, "  t0+%-8s %-18s probe=%s ok=%t rc=%d reason=%q detail=%q\n",
			e.At, e.Kind, e.Probe, e.OK, e.RestartCount, e.Reason, e.Detail)
	}
	return b.String()
}

// summary renders the events pred selects as "<kind>[ probe ok][ rc][
// reason]@<time>", one per event, for exact comparison.
func (f *fakeRun) summary(pred func(event.Event) bool) []string {
	var out []string
	for _, e := range f.events() {
		if !pred(e) {
			continue
		}
		s := string(e.Kind)
		switch e.Kind {
		case event.ProbeResult:
			s += fmt.Sprintf(" %s %t", e.Probe, e.OK)
		case event.ContainerRestart, event.PodStarted:
			s += fmt.Sprintf(" rc=%d", e.RestartCount)
		case event.K8sEvent:
			s += " " + e.Reason
			if e.Reason == "BackOff" {
				s += " " + strings.Fields(e.Detail)[1]
			}
		}
		out = append(out, s+"@"+e.At.String())
	}
	return out
}

func checkSeq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// testServerReplica is a ReplicaConfig running the package's test server
// on a free port.
func testServerReplica(t *testing.T, probes scenario.Probes, env ...string) ReplicaConfig {
	t.Helper()
	ports, err := netport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	return ReplicaConfig{
		Command: []string{testproc.Executable(t)},
		Env:     append(append(os.Environ(), testServerEnv+"=1", "PORT="+strconv.Itoa(ports[0])), env...),
		Port:    ports[0],
		Probes:  probes,
	}
}

// waitListening waits (real time) until the replica's port accepts
// connections, so that the probes the test lets run find the server up.
func waitListening(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d never accepted connections: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isProbeKind(e event.Event) bool { return e.Kind == event.ProbeResult }

// TestProbeScheduleFakeClock: each probe runs first initialDelaySeconds
// after the container started, then every periodSeconds; a probe's
// schedule does not depend on another's; a container starts unready and
// turns ready at the first readiness success (successThreshold 1).
func TestProbeScheduleFakeClock(t *testing.T) {
	t.Parallel()
	s := time.Second
	cfg := testServerReplica(t, scenario.Probes{
		LivenessProbe:  &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/live"}, InitialDelaySeconds: 1, PeriodSeconds: 4},
		ReadinessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/ready"}, InitialDelaySeconds: 2, PeriodSeconds: 2},
	})
	f := startFake(t, cfg)
	waitListening(t, cfg.Port)
	f.clk.waitPending(t, f.t0, 1*s)
	f.clk.waitPending(t, f.t0, 2*s)
	// Probes due by each second of the fake clock: liveness at 1, 5, 9;
	// readiness at 2, 4, 6, 8.
	due := []int{0, 1, 2, 2, 3, 4, 5, 5, 6, 7}
	for sec := 1; sec < len(due); sec++ {
		f.at(time.Duration(sec) * s)
		f.wait(fmt.Sprintf("probes by t0+%ds", sec), due[sec], isProbeKind)
		if f.r.Status().Ready != (sec >= 2) {
			t.Errorf("t0+%ds: status %+v, want ready from 2s on", sec, f.r.Status())
		}
	}
	checkSeq(t, "probe and readiness events", f.summary(func(e event.Event) bool {
		return e.Kind == event.ProbeResult || e.Kind == event.PodReady || e.Kind == event.PodUnready || e.Kind == event.PodStarted
	}), []string{
		"pod-started rc=0@0s",
		"probe liveness true@1s",
		"probe readiness true@2s",
		"pod-ready@2s",
		"probe readiness true@4s",
		"probe liveness true@5s",
		"probe readiness true@6s",
		"probe readiness true@8s",
		"probe liveness true@9s",
	})
}

// TestLivenessKillFakeClock: a liveness probe that starts failing restarts
// the container at exactly the failureThreshold-th failure in a row (not
// before), without back-off on the first kill; the new container's probes
// start again initialDelaySeconds after it started.
func TestLivenessKillFakeClock(t *testing.T) {
	t.Parallel()
	s := time.Second
	cfg := testServerReplica(t, scenario.Probes{
		LivenessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/live"},
			InitialDelaySeconds: 1, PeriodSeconds: 2, FailureThreshold: 3},
	})
	f := startFake(t, cfg)
	waitListening(t, cfg.Port)
	live := func(e event.Event) bool { return e.Kind == event.ProbeResult && e.Probe == event.ProbeLiveness }
	for i, sec := range []int{1, 3} {
		f.clk.waitPending(t, f.t0, time.Duration(sec)*s)
		f.at(time.Duration(sec) * s)
		f.wait("liveness probe", i+1, live)
	}
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/control?live=503", cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	for i, sec := range []int{5, 7} {
		f.at(time.Duration(sec) * s)
		f.wait("liveness probe", i+3, live)
	}
	if n := count(f.events(), isKind(event.ContainerRestart, "svc-0")); n != 0 {
		t.Fatalf("restarted after 2 failures:\n%s", f.dump())
	}
	f.at(9 * s)
	f.wait("restart", 2, isKind(event.PodStarted, "svc-0"))
	waitListening(t, cfg.Port)
	f.clk.waitPending(t, f.t0, 10*s)
	f.at(10 * s)
	f.wait("liveness probe of the new container", 6, live)
	checkSeq(t, "liveness, kill and restart", f.summary(func(e event.Event) bool {
		return e.Kind == event.ProbeResult || e.Kind == event.ContainerRestart || e.Kind == event.PodStarted ||
			e.Kind == event.K8sEvent
	}), []string{
		"pod-started rc=0@0s",
		"probe liveness true@1s",
		"probe liveness true@3s",
		"probe liveness false@5s",
		"probe liveness false@7s",
		"probe liveness false@9s",
		"k8s-event Killing@9s",
		"container-restart rc=1@9s",
		"pod-started rc=1@9s",
		"probe liveness true@10s",
	})
	if st := f.r.Status(); st.RestartCount != 1 {
		t.Errorf("restartCount %d, want 1", st.RestartCount)
	}
}

// crashScript writes a shell script that exits 3 at once unless the file
// flag exists, in which case it sleeps.
func crashScript(t *testing.T) (argv []string, flag string) {
	dir := t.TempDir()
	flag = filepath.Join(dir, "run-long")
	return []string{"/bin/sh", "-c", `test -f "$1" && exec sleep 3600; exit 3`, "sh", flag}, flag
}

// TestCrashLoopBackOffFakeClock: a container that keeps exiting is
// restarted at once the first time, then after the kubelet's back-off:
// 10 s, doubling, capped at 5 min, with a BackOff event and a restart count
// rising by one each time; a container that ran for more than 10 min
// resets the back-off (its restart is immediate, the next wait is 10 s
// again).
func TestCrashLoopBackOffFakeClock(t *testing.T) {
	t.Parallel()
	argv, flag := crashScript(t)
	f := startFake(t, ReplicaConfig{Command: argv, Env: os.Environ(), Port: 1})
	restarts := func(e event.Event) bool { return e.Kind == event.ContainerRestart }
	f.wait("first restart", 1, restarts)
	times := []time.Duration{10, 30, 70, 150, 310, 610, 910}
	for i, at := range times {
		at *= time.Second
		f.clk.waitPending(t, f.t0, at)
		if i == len(times)-1 {
			// The 8th restart runs long.
			if err := os.WriteFile(flag, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f.at(at)
		f.wait("restart", i+2, restarts)
	}
	f.wait("long-running container", 9, func(e event.Event) bool { return e.Kind == event.PodStarted })
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	pid := f.r.Status().PID
	if pid == 0 {
		t.Fatalf("no process runs after restart 8: %+v", f.r.Status())
	}
	// 11 minutes later it dies.
	f.at(910*time.Second + 11*time.Minute)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.wait("restart after a long run", 9, restarts)
	f.clk.waitPending(t, f.t0, 1580*time.Second)
	// The 10th restart runs long again (no further back-off to race with).
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.at(1580 * time.Second)
	f.wait("restart", 10, restarts)
	checkSeq(t, "restarts and back-off", f.summary(func(e event.Event) bool {
		return e.Kind == event.ContainerRestart || e.Kind == event.K8sEvent
	}), []string{
		"container-restart rc=1@0s",
		"k8s-event BackOff 10s@0s",
		"container-restart rc=2@10s",
		"k8s-event BackOff 20s@10s",
		"container-restart rc=3@30s",
		"k8s-event BackOff 40s@30s",
		"container-restart rc=4@1m10s",
		"k8s-event BackOff 1m20s@1m10s",
		"container-restart rc=5@2m30s",
		"k8s-event BackOff 2m40s@2m30s",
		"container-restart rc=6@5m10s",
		"k8s-event BackOff 5m0s@5m10s",
		"container-restart rc=7@10m10s",
		"k8s-event BackOff 5m0s@10m10s",
		"container-restart rc=8@15m10s",
		"container-restart rc=9@26m10s",
		"k8s-event BackOff 10s@26m10s",
		"container-restart rc=10@26m20s",
	})
	if st := f.r.Status(); st.RestartCount != 10 {
		t.Errorf("restartCount %d, want 10", st.RestartCount)
	}
}

// TestFailedStartFakeClock: a restart whose process cannot be started is a
// Failed event, counts as a restart and backs off like a crash.
func TestFailedStartFakeClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "app")
	// The first instance removes its own program and exits.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nrm -f \"$0\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := startFake(t, ReplicaConfig{Command: []string{script}, Env: os.Environ(), Port: 1})
	f.clk.waitPending(t, f.t0, 10*time.Second)
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.at(10 * time.Second)
	f.wait("second start", 2, func(e event.Event) bool { return e.Kind == event.PodStarted })
	checkSeq(t, "failed start", f.summary(func(e event.Event) bool {
		return e.Kind == event.ContainerRestart || e.Kind == event.K8sEvent || e.Kind == event.PodStarted
	}), []string{
		"pod-started rc=0@0s",
		"container-restart rc=1@0s",
		"k8s-event Failed@0s",
		"k8s-event BackOff 10s@0s",
		"container-restart rc=2@10s",
		"pod-started rc=2@10s",
	})
	for _, e := range f.events() {
		if e.Kind == event.K8sEvent && e.Reason == "Failed" &&
			(!strings.Contains(e.Detail, "failed to start container svc") || !strings.Contains(e.Detail, "no such file or directory")) {
			t.Errorf("Failed event detail %q", e.Detail)
		}
	}
	if st := f.r.Status(); st.RestartCount != 2 || st.PID == 0 {
		t.Errorf("status %+v, want restartCount 2 and a running process", st)
	}
}

// TestStartRetriesTextFileBusy: a program still held open for writing when
// its replica starts (as a forked child briefly holds every descriptor of
// its parent, golang/go#22315) fails exec with ETXTBSY; the start waits
// for it to be released instead of failing the pod.
func TestStartRetriesTextFileBusy(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "app")
	w, err := os.OpenFile(script, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("#!/bin/sh\nexec sleep 3600\n"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(20 * time.Millisecond)
		w.Close()
	}()
	f := startFake(t, ReplicaConfig{Command: []string{script}, Env: os.Environ(), Port: 1})
	<-released
	if st := f.r.Status(); st.State != StateRunning || st.PID == 0 {
		t.Fatalf("status %+v, want a running process", st)
	}
}
