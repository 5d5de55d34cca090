package localenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// Generous bounds: the machine is shared; tests wait on events, never on
// tight wall-clock times.
const waitLong = 90 * time.Second

type harness struct {
	t     *testing.T
	log   *event.Log
	svc   *Service
	clock *event.Clock
}

func httpProbe(path string, period, failure, success int32) *scenario.Probe {
	return &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: path}, PeriodSeconds: period,
		FailureThreshold: failure, SuccessThreshold: success}
}

// startService runs the test server as spec's command and registers a
// cleanup that stops it and proves no process outlived it.
func startService(t *testing.T, spec ServiceSpec) *harness {
	t.Helper()
	spec.Command = []string{testproc.Executable(t)}
	env := map[string]string{testServerEnv: "1"}
	for k, v := range spec.Env {
		env[k] = v
	}
	spec.Env = env
	if spec.LogDir == "" {
		spec.LogDir = t.TempDir()
	}
	if spec.Options.BackoffBase == 0 {
		spec.Options.BackoffBase = 200 * time.Millisecond
	}
	if spec.Grace == 0 {
		spec.Grace = 2 * time.Second
	}
	h := &harness{t: t, log: &event.Log{}, clock: event.NewClock()}
	var err error
	h.svc, err = Start(context.Background(), h.clock, h.log, spec, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := h.svc.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		h.assertNoSurvivors()
	})
	return h
}

// assertNoSurvivors checks that every process the service started (from
// the PodStarted events) and every child they reported is gone.
func (h *harness) assertNoSurvivors() {
	h.t.Helper()
	var pids []int
	for _, e := range h.log.Events() {
		if e.Kind == event.PodStarted {
			pid, err := strconv.Atoi(strings.TrimPrefix(e.Detail, "pid "))
			if err != nil {
				h.t.Errorf("PodStarted detail %q has no pid", e.Detail)
				continue
			}
			pids = append(pids, pid)
		}
	}
	pids = append(pids, h.childPIDs()...)
	if len(pids) == 0 {
		h.t.Error("no pids recorded")
	}
	for _, pid := range pids {
		if !waitGone(pid, 15*time.Second) {
			h.t.Errorf("process %d outlived the service", pid)
		}
	}
}

var childRE = regexp.MustCompile(`^child pid (\d+)$`)

func (h *harness) childPIDs() []int {
	var out []int
	files, _ := filepath.Glob(filepath.Join(h.svc.LogDir(), "*.log"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if m := childRE.FindStringSubmatch(sc.Text()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				out = append(out, pid)
			}
		}
		_ = fh.Close()
	}
	return out
}

// waitGone reports whether pid is gone (or a zombie awaiting its new
// parent) within d.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X') {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) waitReady(n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.WaitReady(ctx, n); err != nil {
		h.t.Fatalf("WaitReady(%d): %v", n, err)
	}
}

// waitEvents waits until at least n events satisfy pred and returns them.
func (h *harness) waitEvents(what string, n int, pred func(event.Event) bool) []event.Event {
	h.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		var got []event.Event
		for _, e := range h.log.Events() {
			if pred(e) {
				got = append(got, e)
			}
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %d %s (got %d); events:\n%s", n, what, len(got), h.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) dump() string {
	var b strings.Builder
	for _, e := range h.log.Events() {
		fmt.Fprintf(&b, "  %8.3fs %-18s pod=%s probe=%s ok=%t rc=%d reason=%q detail=%q\n",
			e.At.Seconds(), e.Kind, e.Pod, e.Probe, e.OK, e.RestartCount, e.Reason, e.Detail)
	}
	return b.String()
}

func (h *harness) podEvents(pod string) []event.Event {
	var out []event.Event
	for _, e := range h.log.Events() {
		if e.Pod == pod {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) control(pod, query string) {
	h.t.Helper()
	for _, st := range h.svc.Status() {
		if st.Pod != pod {
			continue
		}
		res, err := http.Get("http://" + st.Address() + "/control?" + query)
		if err != nil {
			h.t.Fatalf("control %s %s: %v", pod, query, err)
		}
		_ = res.Body.Close()
		return
	}
	h.t.Fatalf("no pod %s", pod)
}

func isKind(k event.Kind, pod string) func(event.Event) bool {
	return func(e event.Event) bool { return e.Kind == k && e.Pod == pod }
}

func isProbe(probe, pod string) func(event.Event) bool {
	return func(e event.Event) bool { return e.Kind == event.ProbeResult && e.Probe == probe && e.Pod == pod }
}

// index returns the index of the first event at or after from matching pred, or -1.
func index(evs []event.Event, from int, pred func(event.Event) bool) int {
	for i := from; i < len(evs); i++ {
		if pred(evs[i]) {
			return i
		}
	}
	return -1
}

func count(evs []event.Event, pred func(event.Event) bool) int {
	n := 0
	for _, e := range evs {
		if pred(e) {
			n++
		}
	}
	return n
}

// TestLivenessFailureRestartsOnce: liveness failing 3 times in a row
// restarts the container once (restartCount 1) and it comes back ready.
func TestLivenessFailureRestartsOnce(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "live", Replicas: 1, Probes: scenario.Probes{
		LivenessProbe:  httpProbe("/live", 1, 3, 0),
		ReadinessProbe: httpProbe("/ready", 1, 0, 0),
	}})
	const pod = "live-0"
	h.waitReady(1)
	pid0 := h.svc.Status()[0].PID
	h.waitEvents("liveness successes", 1, func(e event.Event) bool { return isProbe(event.ProbeLiveness, pod)(e) && e.OK })
	h.control(pod, "live=503")

	r := h.waitEvents("restart", 1, isKind(event.ContainerRestart, pod))[0]
	if r.RestartCount != 1 || r.Probe != event.ProbeLiveness {
		t.Errorf("restart: count %d probe %q, want 1 liveness", r.RestartCount, r.Probe)
	}
	if !strings.HasPrefix(r.Reason, "liveness probe failed 3 times: HTTP probe failed with statuscode: 503") {
		t.Errorf("restart reason %q", r.Reason)
	}
	if !strings.Contains(strings.Join(r.Logs, "\n"), "control: live=503") {
		t.Errorf("restart logs lack the old instance's lines: %q", r.Logs)
	}
	// Comes back: started again, ready again, and stays at one restart
	// while the new instance passes liveness three times.
	h.waitEvents("ready after restart", 2, isKind(event.PodReady, pod))
	h.waitEvents("liveness successes after restart", 3, func(e event.Event) bool {
		return isProbe(event.ProbeLiveness, pod)(e) && e.OK && e.At > r.At
	})

	evs := h.podEvents(pod)
	iKill := index(evs, 0, func(e event.Event) bool { return e.Kind == event.K8sEvent && e.Reason == "Killing" })
	iRestart := index(evs, 0, isKind(event.ContainerRestart, pod))
	iStarted := index(evs, iRestart, isKind(event.PodStarted, pod))
	iReady := index(evs, iStarted, isKind(event.PodReady, pod))
	if iKill < 0 || iKill > iRestart || iStarted < 0 || iReady < 0 {
		t.Fatalf("order Killing(%d) < ContainerRestart(%d) < PodStarted(%d) < PodReady(%d) broken:\n%s", iKill, iRestart, iStarted, iReady, h.dump())
	}
	// The restart is dated by the kill decision; the new process by its start.
	if evs[iRestart].At != evs[iKill].At {
		t.Errorf("restart at %s, want the Killing's time %s", evs[iRestart].At, evs[iKill].At)
	}
	// Exactly three liveness failures in a row before the kill.
	var run []bool
	for _, e := range evs[:iKill] {
		if isProbe(event.ProbeLiveness, pod)(e) {
			run = append(run, e.OK)
		}
	}
	if n := len(run); n < 4 || run[n-1] || run[n-2] || run[n-3] || !run[n-4] {
		t.Errorf("liveness results before the kill end %v, want ... true false false false", run)
	}
	// No liveness probe of the dying instance after the kill decision.
	if n := count(evs[iKill:iStarted], isProbe(event.ProbeLiveness, pod)); n != 0 {
		t.Errorf("%d liveness probes ran after the kill", n)
	}
	if n := count(evs, isKind(event.ContainerRestart, pod)); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	if st := h.svc.Status()[0]; st.RestartCount != 1 || !st.Ready || st.PID == pid0 || st.PID == 0 {
		t.Errorf("status %+v, want restartCount 1, ready, a new pid (old %d)", st, pid0)
	}
	if !waitGone(pid0, 10*time.Second) {
		t.Errorf("old process %d still there", pid0)
	}
}

// TestReadinessHysteresis: with failureThreshold 3 and successThreshold 2,
// a failure streak of 2 leaves the replica ready, 3 makes it unready (and
// the proxy stops routing at that moment), and it needs 2 successes to
// come back.
func TestReadinessHysteresis(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "hyst", Replicas: 1, Probes: scenario.Probes{
		ReadinessProbe: httpProbe("/ready", 1, 3, 2),
	}})
	const pod = "hyst-0"
	h.waitReady(1)
	ready := isProbe(event.ProbeReadiness, pod)

	// Streak of 2: still ready.
	h.control(pod, "ready=fail:2")
	h.waitEvents("readiness failures", 2, func(e event.Event) bool { return ready(e) && !e.OK })
	mark := h.clock.Now()
	h.waitEvents("readiness success after the streak", 1, func(e event.Event) bool { return ready(e) && e.OK && e.At > mark })
	if n := count(h.podEvents(pod), isKind(event.PodUnready, pod)); n != 0 {
		t.Fatalf("a failure streak of 2 made the pod unready:\n%s", h.dump())
	}
	if !h.svc.Status()[0].Ready {
		t.Fatal("not ready after a streak of 2")
	}

	// Streak of 3: unready; then 2 successes to return.
	h.control(pod, "ready=fail:3")
	h.waitEvents("unready", 1, isKind(event.PodUnready, pod))
	h.waitEvents("ready again", 2, isKind(event.PodReady, pod))

	evs := h.podEvents(pod)
	iUnready := index(evs, 0, isKind(event.PodUnready, pod))
	var before []bool
	for _, e := range evs[:iUnready] {
		if ready(e) {
			before = append(before, e.OK)
		}
	}
	if n := len(before); n < 4 || before[n-1] || before[n-2] || before[n-3] || !before[n-4] {
		t.Errorf("readiness results before unready end %v, want ... true false false false", before)
	}
	if i := index(evs, iUnready, isKind(event.EndpointNotReady, pod)); i != iUnready+1 {
		t.Errorf("EndpointNotReady not right after PodUnready:\n%s", h.dump())
	}
	iReady := index(evs, iUnready, isKind(event.PodReady, pod))
	var between []bool
	for _, e := range evs[iUnready:iReady] {
		if ready(e) {
			between = append(between, e.OK)
		}
	}
	if len(between) != 2 || !between[0] || !between[1] {
		t.Errorf("readiness results between unready and ready %v, want [true true]", between)
	}
	if i := index(evs, iReady, isKind(event.EndpointReady, pod)); i != iReady+1 {
		t.Errorf("EndpointReady not right after PodReady:\n%s", h.dump())
	}
	if n := count(evs, isKind(event.ContainerRestart, pod)); n != 0 {
		t.Errorf("readiness failures restarted the container %d times", n)
	}
}

// TestStartupFailureRestarts: a startup probe failing past its budget
// restarts the container; liveness and readiness never run before startup
// passes.
func TestStartupFailureRestarts(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "boot", Replicas: 1, Env: map[string]string{"STARTUP": "503"},
		Probes: scenario.Probes{
			StartupProbe:   httpProbe("/startup", 1, 2, 0),
			LivenessProbe:  httpProbe("/live", 1, 0, 0),
			ReadinessProbe: httpProbe("/ready", 1, 0, 0),
		}})
	const pod = "boot-0"
	r := h.waitEvents("restart", 2, isKind(event.ContainerRestart, pod))
	for i, e := range r {
		if e.Probe != event.ProbeStartup || e.RestartCount != int32(i+1) ||
			!strings.HasPrefix(e.Reason, "startup probe failed 2 times: HTTP probe failed with statuscode: 503") {
			t.Errorf("restart %d: %+v", i, e)
		}
	}
	evs := h.podEvents(pod)
	for _, e := range evs {
		if e.Kind == event.ProbeResult && e.Probe != event.ProbeStartup {
			t.Errorf("%s probe ran before startup passed: %+v", e.Probe, e)
		}
		if e.Kind == event.PodReady {
			t.Errorf("pod became ready without passing startup")
		}
	}
	// Exactly failureThreshold startup probes per instance.
	iFirst := index(evs, 0, isKind(event.ContainerRestart, pod))
	if n := count(evs[:iFirst], isProbe(event.ProbeStartup, pod)); n != 2 {
		t.Errorf("%d startup probes before the first restart, want 2", n)
	}
}

// TestStartupGatesProbes: liveness and readiness start only after the
// startup probe passed.
func TestStartupGatesProbes(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "gate", Replicas: 1, Env: map[string]string{"STARTUP": "fail:2"},
		Probes: scenario.Probes{
			StartupProbe:   httpProbe("/startup", 1, 5, 0),
			LivenessProbe:  httpProbe("/live", 1, 0, 0),
			ReadinessProbe: httpProbe("/ready", 1, 0, 0),
		}})
	const pod = "gate-0"
	h.waitReady(1)
	h.waitEvents("liveness", 1, isProbe(event.ProbeLiveness, pod))
	evs := h.podEvents(pod)
	iOK := index(evs, 0, func(e event.Event) bool { return isProbe(event.ProbeStartup, pod)(e) && e.OK })
	if iOK < 0 {
		t.Fatalf("no startup success:\n%s", h.dump())
	}
	if n := count(evs[:iOK], isProbe(event.ProbeStartup, pod)); n < 2 {
		t.Errorf("%d startup probes before success, want >= 2 (fail:2)", n)
	}
	for _, e := range evs[:iOK] {
		if e.Kind == event.ProbeResult && e.Probe != event.ProbeStartup {
			t.Errorf("%s probe before startup passed", e.Probe)
		}
	}
	if n := count(evs[iOK+1:], isProbe(event.ProbeStartup, pod)); n != 0 {
		t.Errorf("%d startup probes after it passed", n)
	}
	if n := count(evs, isKind(event.ContainerRestart, pod)); n != 0 {
		t.Errorf("%d restarts", n)
	}
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestProxyRoutesOnlyToReady: the local Service balances across ready
// replicas, stops routing to an unready one, and answers 503 with none.
func TestProxyRoutesOnlyToReady(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "web", Replicas: 2, Probes: scenario.Probes{
		ReadinessProbe: httpProbe("/ready", 1, 1, 0),
	}})
	h.waitReady(2)
	st := h.svc.Status()
	want := map[string]bool{fmt.Sprintf("pid=%d port=%d\n", st[0].PID, st[0].Port): true,
		fmt.Sprintf("pid=%d port=%d\n", st[1].PID, st[1].Port): true}
	seen := map[string]int{}
	for range 10 {
		code, body := getBody(t, h.svc.URL()+"/")
		if code != 200 || !want[body] {
			t.Fatalf("GET via proxy: %d %q", code, body)
		}
		seen[body]++
	}
	if len(seen) != 2 || seen[fmt.Sprintf("pid=%d port=%d\n", st[0].PID, st[0].Port)] != 5 {
		t.Errorf("round robin over 2 replicas gave %v", seen)
	}

	h.control("web-0", "ready=503")
	h.waitEvents("endpoint not ready", 1, isKind(event.EndpointNotReady, "web-0"))
	only := fmt.Sprintf("pid=%d port=%d\n", st[1].PID, st[1].Port)
	for range 20 {
		if code, body := getBody(t, h.svc.URL()+"/x"); code != 200 || body != only {
			t.Fatalf("with web-0 unready got %d %q, want 200 %q", code, body, only)
		}
	}

	h.control("web-1", "ready=503")
	h.waitEvents("endpoint not ready", 1, isKind(event.EndpointNotReady, "web-1"))
	code, body := getBody(t, h.svc.URL()+"/")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no ready endpoints") {
		t.Fatalf("with none ready got %d %q, want 503", code, body)
	}

	h.control("web-0", "ready=200")
	h.control("web-1", "ready=200")
	h.waitReady(2)
	if code, _ := getBody(t, h.svc.URL()+"/"); code != 200 {
		t.Errorf("after recovery got %d", code)
	}
	if n := count(h.log.Events(), func(e event.Event) bool { return e.Kind == event.EndpointReady }); n != 4 {
		t.Errorf("%d EndpointReady events, want 4", n)
	}
}

// TestCrashLoopBackOff: a process that exits by itself is restarted with
// the kubelet's back-off: at once, then base, then 2 x base.
func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	const base = 500 * time.Millisecond
	h := startService(t, ServiceSpec{Name: "crash", Replicas: 1, Env: map[string]string{"EXIT_AFTER": "300ms"},
		Options: Options{BackoffBase: base}})
	const pod = "crash-0"
	rs := h.waitEvents("restarts", 3, isKind(event.ContainerRestart, pod))
	for i, e := range rs[:3] {
		if e.RestartCount != int32(i+1) || e.Probe != "" || e.Reason != "container exited with code 3 (Error)" {
			t.Errorf("restart %d: %+v", i, e)
		}
		if !strings.Contains(strings.Join(e.Logs, "\n"), "exiting by myself") {
			t.Errorf("restart %d logs %q", i, e.Logs)
		}
	}
	evs := h.podEvents(pod)
	wantMin := []time.Duration{0, base, 2 * base}
	from := 0
	for i := range 3 {
		// The restart is dated by the exit; the back-off holds the start
		// of the next process.
		iDown := index(evs, from, isKind(event.PodUnready, pod))
		iUp := index(evs, iDown, func(e event.Event) bool {
			return isKind(event.PodStarted, pod)(e) && e.RestartCount == int32(i+1)
		})
		gap := evs[iUp].At - evs[iDown].At
		if gap < wantMin[i]*8/10 {
			t.Errorf("restart %d: the new process came %s after the exit, want >= %s", i+1, gap, wantMin[i])
		}
		if r := rs[i]; r.At > evs[iDown].At {
			t.Errorf("restart %d dated %s, after the exit's unready at %s", i+1, r.At, evs[iDown].At)
		}
		from = iUp
	}
	if n := count(evs, func(e event.Event) bool { return e.Kind == event.K8sEvent && e.Reason == "BackOff" }); n < 2 {
		t.Errorf("%d BackOff events, want >= 2", n)
	}
}

// TestStopKillsProcessGroups: a replica that ignores SIGTERM is killed
// after the grace period, with its children; nothing outlives Stop.
func TestStopKillsProcessGroups(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "stubborn", Replicas: 2,
		Env: map[string]string{"IGNORE_TERM": "1", "CHILD": "1"}})
	h.waitReady(2)
	deadline := time.Now().Add(waitLong)
	for len(h.childPIDs()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("children never reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	h.assertNoSurvivors()
	for _, st := range h.svc.Status() {
		if st.State != StateTerminated || st.PID != 0 || st.Ready {
			t.Errorf("after Stop: %+v", st)
		}
	}
	evs := h.log.Events()
	if n := count(evs, func(e event.Event) bool { return e.Kind == event.EndpointRemoved }); n != 2 {
		t.Errorf("%d EndpointRemoved, want 2", n)
	}
	if code := func() int {
		res, err := http.Get(h.svc.URL())
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}(); code != 0 {
		t.Errorf("proxy still answers after Stop: %d", code)
	}
}

// TestCancelStopsEverything: cancelling Start's context stops the service.
func TestCancelStopsEverything(t *testing.T) {
	t.Parallel()
	exe := testproc.Executable(t)
	log := &event.Log{}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := Start(ctx, event.NewClock(), log, ServiceSpec{Name: "cancel", Command: []string{exe}, Replicas: 2,
		Env: map[string]string{testServerEnv: "1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), waitLong)
	defer wcancel()
	if err := svc.WaitReady(wctx, 2); err != nil {
		t.Fatal(err)
	}
	dir := svc.LogDir()
	pids := []int{svc.Status()[0].PID, svc.Status()[1].PID}
	cancel()
	select {
	case <-svc.Done():
	case <-time.After(waitLong):
		t.Fatal("service did not stop after cancel")
	}
	for _, pid := range pids {
		if !waitGone(pid, 10*time.Second) {
			t.Errorf("pid %d outlived cancel", pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary log dir %s left behind: %v", dir, err)
	}
}

// TestExecAndTCPProbes: tcpSocket readiness and exec liveness, with the
// replica's environment visible to the exec probe.
func TestExecAndTCPProbes(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "other", Replicas: 1, Probes: scenario.Probes{
		ReadinessProbe: &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{}, PeriodSeconds: 1},
		LivenessProbe: &scenario.Probe{Exec: &scenario.ExecAction{Command: []string{"sh", "-c", `test "$PORT" -gt 0`}},
			PeriodSeconds: 1},
	}})
	h.waitReady(1)
	h.waitEvents("exec liveness passes", 2, func(e event.Event) bool { return isProbe(event.ProbeLiveness, "other-0")(e) && e.OK })
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "drill-nosuch-*"))
	tests := []struct {
		name string
		spec ServiceSpec
		want string
	}{
		{"no name", ServiceSpec{Command: []string{"x"}}, "service name is empty"},
		{"no command", ServiceSpec{Name: "a"}, "service a: command is empty"},
		{"negative replicas", ServiceSpec{Name: "a", Command: []string{"x"}, Replicas: -1}, "replicas must be >= 0"},
		{"two handlers", ServiceSpec{Name: "a", Command: []string{"x"}, Probes: scenario.Probes{LivenessProbe: &scenario.Probe{
			HTTPGet: &scenario.HTTPGetAction{Path: "/"}, TCPSocket: &scenario.TCPSocketAction{}}}},
			"livenessProbe: exactly one of httpGet, tcpSocket or exec must be set (found 2)"},
		{"liveness success 2", ServiceSpec{Name: "a", Command: []string{"x"}, Probes: scenario.Probes{
			LivenessProbe: httpProbe("/", 1, 1, 2)}}, "livenessProbe.successThreshold: must be 1 for liveness probes, got 2"},
		{"negative period", ServiceSpec{Name: "a", Command: []string{"x"}, Probes: scenario.Probes{
			ReadinessProbe: httpProbe("/", -1, 1, 1)}}, "readinessProbe.periodSeconds: must be >= 0, got -1"},
		{"no such command", ServiceSpec{Name: "nosuch", Command: []string{"/nonexistent/drill-test-binary"}, Replicas: 2},
			"start service nosuch: start pod nosuch-0: fork/exec /nonexistent/drill-test-binary: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := Start(context.Background(), event.NewClock(), nil, tc.spec, nil)
			if err == nil {
				_ = svc.Stop(context.Background())
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "drill-nosuch-*"))
	if len(after) > len(before) {
		t.Errorf("temporary log directories left behind: %v", after)
	}
}

// TestWaitReadyErrorNamesReplicas: on timeout, WaitReady names each
// replica's state and shows its last log lines.
func TestWaitReadyErrorNamesReplicas(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "slow", Replicas: 2, Env: map[string]string{"READY": "503"},
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 0, 0)}})
	h.waitEvents("readiness failures", 2, func(e event.Event) bool { return e.Kind == event.ProbeResult && !e.OK })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := h.svc.WaitReady(ctx, 1)
	if err == nil {
		t.Fatal("WaitReady succeeded with /ready answering 503")
	}
	t.Logf("WaitReady error:\n%v", err)
	for _, want := range []string{
		"wait for service slow: 0 of 2 replicas ready, want 1: context deadline exceeded",
		"slow-0: running, started=true ready=false restarts=0", "slow-1: running",
		"| test server pid",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
}
