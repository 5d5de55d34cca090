package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/workers"
)

// The workers drill's schedule: 100/s for 6 s on one stream.
const (
	workersRate     = 100
	workersDuration = 6 * time.Second
	// stubDelay is the stub target's fixed answer time: it dominates the
	// latency, so two runs of the same schedule have comparable p99s.
	stubDelay = 20 * time.Millisecond
	// p99Tolerance bounds the difference between the p99 of the workers'
	// merged series and that of a one-process run of the same schedule.
	// They are two real runs on a shared 2-core machine (three worker
	// processes, the agent, the control plane), not one run's data merged
	// two ways, so the HDR precision (3 significant figures, 20 µs at
	// 20 ms) is not a bound that holds here; the merge itself is exact to
	// that precision (internal/workers TestMergeEqualsOneHistogram).
	p99Tolerance = 10 * time.Millisecond
)

// workersScenario writes a kubernetes scenario whose one stream hits url
// at workersRate for workersDuration, on n load workers (0: in this
// process), and returns its path.
func workersScenario(t testing.TB, url string, n int, duration time.Duration) string {
	t.Helper()
	return workersScenarioAt(t, url, n, workersRate, duration)
}

// workersScenarioAt is workersScenario at rate req/s.
func workersScenarioAt(t testing.TB, url string, n, rate int, duration time.Duration) string {
	t.Helper()
	load := ""
	if n > 0 {
		load = fmt.Sprintf("load:\n  workers: %d\n  image: drill:test\n", n)
	}
	doc := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: workers
environment:
  type: kubernetes
  kubernetes:
    allowedContexts: [` + contextName + `]
    namespace: ` + namespace + `
timeline:
  duration: ` + duration.String() + `
` + load + `streams:
  - name: orders
    targets:
      - url: ` + url + `/orders
    rate: ` + strconv.Itoa(rate) + `/s
    timeout: 2s
    lagBudget:
      late: 50ms
      fraction: 0.05
`
	path := filepath.Join(t.TempDir(), "workers.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stubTarget is an HTTP server on loopback that answers 200 after
// stubDelay.
func stubTarget(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(stubDelay)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// loadRun is one `drill load` process.
type loadRun struct {
	p     *proc
	save  string // --save file
	state string // XDG_STATE_HOME
}

// startLoad starts `drill load -v` of scenario with a t=0 margin of
// margin, its state (the workers journal) under its own XDG_STATE_HOME.
func (e *clusterEnv) startLoad(t testing.TB, scenario string, margin time.Duration) *loadRun {
	t.Helper()
	dir := t.TempDir()
	r := &loadRun{save: filepath.Join(dir, "series.json"), state: filepath.Join(dir, "state")}
	argv := []string{e.drill, "load", "-v", "--kubeconfig", e.kubeconfig, "--context", contextName,
		"--start-margin", margin.String(), "--progress", "-1s", "--save", r.save, scenario}
	t.Logf("running %s", strings.Join(argv[1:], " "))
	p, err := startProc("drill-load", dir, append(os.Environ(), "XDG_STATE_HOME="+r.state), argv...)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(func() { _ = p.stop(syscall.SIGINT, time.Minute) })
	return r
}

// wait waits for the run to end (at most timeout) and returns its exit
// code and stdout.
func (r *loadRun) wait(t testing.TB, timeout time.Duration) (int, string) {
	t.Helper()
	select {
	case <-r.p.exited:
	case <-time.After(timeout):
		_ = r.p.stop(syscall.SIGINT, time.Minute)
		t.Fatalf("drill load did not end within %s:\n%s", timeout, r.p.tail(30))
	}
	out, _ := os.ReadFile(r.p.stdout)
	return r.p.cmd.ProcessState.ExitCode(), string(out)
}

// total reads the --save file's stream orders, all seconds merged.
func (r *loadRun) total(t testing.TB) *measure.Bucket {
	t.Helper()
	data, err := os.ReadFile(r.save)
	if err != nil {
		t.Fatalf("read the saved series: %v\n%s", err, r.p.tail(30))
	}
	var series map[string]*measure.Series
	if err := json.Unmarshal(data, &series); err != nil {
		t.Fatalf("decode the saved series: %v", err)
	}
	s := series["orders"]
	if s == nil {
		t.Fatalf("no series for stream orders in %s", r.save)
	}
	return s.Total()
}

// workerPods waits (up to timeout) for the one workers Job in the
// namespace to have n running pods, and returns the run id, the shared
// t=0 (from the Job's spec Secret) and the pods by completion index.
func (e *clusterEnv) workerPods(t testing.TB, n int, timeout time.Duration, p *proc) (string, time.Time, map[int]*corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sel := workers.LabelRole + "=" + workers.RoleWorker
	for {
		jobs, err := e.cs.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && len(jobs.Items) == 1 {
			job := jobs.Items[0]
			runID := job.Labels[workers.LabelRun]
			pods, perr := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: workers.RunSelector(runID)})
			secret, serr := e.cs.CoreV1().Secrets(namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if perr == nil && serr == nil {
				byIndex := map[int]*corev1.Pod{}
				for i := range pods.Items {
					pod := &pods.Items[i]
					idx, err := strconv.Atoi(pod.Annotations[workers.AnnotationIndex])
					if err == nil && pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].ContainerID != "" {
						byIndex[idx] = pod
					}
				}
				if len(byIndex) == n {
					spec, err := workers.DecodeSpec(string(secret.Data[workers.SpecKey]))
					if err != nil {
						t.Fatalf("the workers' spec Secret: %v", err)
					}
					return runID, spec.Start, byIndex
				}
			}
		}
		if !p.running() {
			t.Fatalf("drill load exited before its %d workers ran:\n%s", n, p.tail(30))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no workers Job with %d running pods within %s:\n%s\nagent:\n%s", n, timeout, p.tail(30), e.agent.tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// requireRunGone fails t unless no Job, pod or Secret of runID is left
// (waiting up to a minute for pods the agent is still stopping).
func (e *clusterEnv) requireRunGone(t testing.TB, runID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: workers.RunSelector(runID)}
	for {
		jobs, jerr := e.cs.BatchV1().Jobs(namespace).List(ctx, sel)
		pods, perr := e.cs.CoreV1().Pods(namespace).List(ctx, sel)
		secrets, serr := e.cs.CoreV1().Secrets(namespace).List(ctx, sel)
		if jerr == nil && perr == nil && serr == nil && len(jobs.Items)+len(pods.Items)+len(secrets.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s left %v jobs, %v pods, %v secrets (errors %v %v %v)", runID, len(jobs.Items), len(pods.Items), len(secrets.Items), jerr, perr, serr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// workerLine matches a worker's result line of drill load.
var workerLine = regexp.MustCompile(`(?m)^worker (\d+)  (done|FAILED|stopped)  pod (\S+)  sent (\d+)  late (\d+)  lag p99 (\S+) max (\S+)  started late by (\S+)  clock (.*)$`)

// TestWorkersDrill: drill load of a 3-worker scenario against the real
// control plane: the Job controller makes the Indexed Job's pods, drill
// agent runs them as `drill worker` processes and serves their logs to
// the API server, drill follows them and merges the seconds. The merged
// intended count is the schedule's, every worker says how much it sent
// and its dispatch lag, each measured its clock against the API server's,
// and the merged p99 is that of a one-process run of the same schedule
// (within p99Tolerance). Nothing of the run is left.
func TestWorkersDrill(t *testing.T) {
	e := requireEnv(t)
	url := stubTarget(t)

	single := e.startLoad(t, workersScenario(t, url, 0, workersDuration), 0)
	code, out := single.wait(t, 2*time.Minute)
	if code != 0 {
		t.Fatalf("one-process drill load: exit %d\n%s\n%s", code, out, single.p.tail(20))
	}
	one := single.total(t)

	r := e.startLoad(t, workersScenario(t, url, 3, workersDuration), 15*time.Second)
	runID, _, _ := e.workerPods(t, 3, 2*time.Minute, r.p)
	code, out = r.wait(t, 3*time.Minute)
	t.Logf("drill load on 3 workers (exit %d):\n%s", code, out)
	if code != 0 {
		t.Fatalf("drill load on 3 workers: exit %d, want 0\n%s\nagent:\n%s", code, r.p.tail(30), e.agent.tail(20))
	}
	merged := r.total(t)
	want := int64(workersRate * workersDuration / time.Second)
	if merged.Intended != want || merged.Requests != want || merged.OK != want {
		t.Errorf("merged intended %d, requests %d, ok %d; want %d each (the schedule)", merged.Intended, merged.Requests, merged.OK, want)
	}
	if one.Intended != want {
		t.Errorf("one-process run intended %d, want %d", one.Intended, want)
	}
	lines := workerLine.FindAllStringSubmatch(out, -1)
	if len(lines) != 3 {
		t.Fatalf("%d worker lines, want 3:\n%s", len(lines), out)
	}
	var sent int64
	for i, m := range lines {
		if m[1] != strconv.Itoa(i) || m[2] != "done" || !strings.HasPrefix(m[3], workers.JobName(runID)+"-"+m[1]+"-") {
			t.Errorf("worker line %q: want worker %d done on a pod of job %s", m[0], i, workers.JobName(runID))
		}
		n, _ := strconv.ParseInt(m[4], 10, 64)
		sent += n
		if lag, err := time.ParseDuration(m[6]); err != nil || lag <= 0 {
			t.Errorf("worker %d: lag p99 %q, want a positive duration", i, m[6])
		}
		// The agent gives the pods the API server's address: every worker
		// measures its clock (one machine: the same clock, within 10 ms).
		if !regexp.MustCompile(`^[+-]\S+ ±\S+$`).MatchString(m[9]) {
			t.Errorf("worker %d: clock %q, want a measured offset", i, m[9])
		}
	}
	if sent != want {
		t.Errorf("the workers sent %d in all, want %d", sent, want)
	}
	p99w, p99o := merged.Quantile(99), one.Quantile(99)
	t.Logf("p99: merged over 3 workers %s, one process %s", p99w, p99o)
	if p99w < stubDelay || p99o < stubDelay {
		t.Errorf("p99 %s (workers) and %s (one process) must be at least the stub's %s", p99w, p99o, stubDelay)
	}
	if d := p99w - p99o; d > p99Tolerance || d < -p99Tolerance {
		t.Errorf("merged p99 %s differs from the one-process p99 %s by more than %s", p99w, p99o, p99Tolerance)
	}
	e.requireRunGone(t, runID)
}

// TestWorkersDrillKilledWorker: a worker process killed mid-run (SIGKILL,
// as an OOM kill would) makes drill load exit 4 naming that worker, its
// pod and the last second it reported; the Job and its pods are deleted
// all the same.
func TestWorkersDrillKilledWorker(t *testing.T) {
	e := requireEnv(t)
	url := stubTarget(t)
	r := e.startLoad(t, workersScenario(t, url, 3, 20*time.Second), 15*time.Second)
	runID, t0, pods := e.workerPods(t, 3, 2*time.Minute, r.p)
	// Kill worker 1 eight seconds into the load: a second closes 4 s after
	// it ends (the 2 s timeout plus 2 s), so it has reported t=0..3 by then.
	time.Sleep(time.Until(t0.Add(8 * time.Second)))
	cid := pods[1].Status.ContainerStatuses[0].ContainerID
	pid, err := strconv.Atoi(strings.TrimPrefix(cid, "drill://"))
	if err != nil || pid <= 1 {
		t.Fatalf("worker 1's containerID %q is not drill://<pid>", cid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker 1 (pid %d): %v", pid, err)
	}
	code, out := r.wait(t, 3*time.Minute)
	stderr, _ := os.ReadFile(r.p.stderr)
	t.Logf("drill load (exit %d):\n%s", code, out)
	if code != 4 {
		t.Fatalf("exit %d, want 4 (measurement invalid)\n%s", code, r.p.tail(30))
	}
	if !regexp.MustCompile(`(?m)^worker 1  FAILED`).MatchString(out) {
		t.Errorf("stdout does not say worker 1 FAILED:\n%s", out)
	}
	named := regexp.MustCompile(`worker 1 \(pod ` + regexp.QuoteMeta(pods[1].Name) + `\) (stopped|failed) at t=\d+s: .*its last second was t=\d+s`)
	if !named.Match(stderr) {
		t.Errorf("stderr does not name worker 1, its pod %s and its last second:\n%s", pods[1].Name, r.p.tail(20))
	}
	e.requireRunGone(t, runID)
}

// TestWorkersDrillCleanupAfterSIGKILL: drill load SIGKILLed while its
// workers run leaves its Job behind; drill cleanup (reading the workers
// journal) deletes the Job, its pods and its Secret.
func TestWorkersDrillCleanupAfterSIGKILL(t *testing.T) {
	e := requireEnv(t)
	url := stubTarget(t)
	r := e.startLoad(t, workersScenario(t, url, 3, 60*time.Second), 15*time.Second)
	begin := time.Now()
	runID, _, pods := e.workerPods(t, 3, 2*time.Minute, r.p)
	t.Logf("run %s: 3 worker pods running %s after drill load started (%s, %s, %s)", runID, time.Since(begin).Round(time.Millisecond), pods[0].Name, pods[1].Name, pods[2].Name)
	if err := r.p.stop(syscall.SIGKILL, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	<-r.p.exited
	jobs, err := e.cs.BatchV1().Jobs(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: workers.RunSelector(runID)})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("after SIGKILL: %d jobs of run %s (%v), want the one left behind", len(jobs.Items), runID, err)
	}
	dir := t.TempDir()
	p, err := startProc("drill-cleanup", dir, append(os.Environ(), "XDG_STATE_HOME="+r.state), e.drill, "cleanup", "-v")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		_ = p.stop(syscall.SIGKILL, time.Second)
		t.Fatalf("drill cleanup did not end:\n%s", p.tail(20))
	}
	out, _ := os.ReadFile(p.stdout)
	t.Logf("drill cleanup:\n%s", out)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("drill cleanup: exit %d\n%s\n%s", code, out, p.tail(20))
	}
	if !strings.Contains(string(out), workers.JobName(runID)) {
		t.Errorf("drill cleanup does not name the Job %s:\n%s", workers.JobName(runID), out)
	}
	e.requireRunGone(t, runID)
}

// TestWorkersRunDrill: drill run of the Kubernetes brownout drill
// (scenarios/k8s/orders-db-brownout.yaml: 200 orders/s for 75 s,
// PostgreSQL paused at 20 s for 15 s) with its load on 3 workers against
// the real control plane. The run passes as the one-process run does
// (no restart, endpoints out through readiness, p99 back after
// recovery); run.json lists the 3 workers, each done, whose requests add
// up to the schedule (15,000), as do the merged seconds; the fault's
// on/off events lie where the timeline put them on the clock the workers
// share; nothing of the run is left.
func TestWorkersRunDrill(t *testing.T) {
	e := requireEnv(t)
	e.apply(t, "order-gateway.yaml")
	w := startWatch(t, e.cs, namespace, "app=order-gateway", "order-gateway")
	w.waitReady(t, 3, 3*time.Minute)

	sc := e.scenario(t, "orders-db-brownout.yaml", func(root *yaml.Node) {
		str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
		load := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("workers"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: "3"},
			str("image"), str("drill:test"),
		}}
		root.Content = append(root.Content, str("load"), load)
	})
	r := e.runDrill(t, "--kubeconfig", e.kubeconfig, "--context", contextName, "--start-margin", "15s", sc)
	t.Logf("drill run on 3 workers: exit %d\n%s", r.code, r.summary())
	run := r.record(t)
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stderr tail:\n%s\nagent:\n%s", r.code, r.stderrTail(30), e.agent.tail(20))
	}
	for _, name := range []string{"no-restarts", "endpoint-removal", "recovered-p99"} {
		if v, msg, _ := result(t, run, name); v != "pass" {
			t.Errorf("%s: %s: %s", name, v, msg)
		}
	}
	const want = 200 * 75
	if len(run.LoadWorkers) != 3 {
		t.Fatalf("run.json lists %d load workers, want 3", len(run.LoadWorkers))
	}
	var sent int64
	for i, lw := range run.LoadWorkers {
		if lw.Index != i || lw.State != "done" || !strings.HasPrefix(lw.Pod, workers.JobName(run.RunID)+"-") {
			t.Errorf("load worker %d: %+v, want index %d done on a pod of job %s", i, lw, i, workers.JobName(run.RunID))
		}
		if lw.LagP99 <= 0 || lw.Clock == "" {
			t.Errorf("load worker %d: lag p99 %s, clock %q: want both measured", i, lw.LagP99, lw.Clock)
		}
		sent += lw.Sent
	}
	if sent != want {
		t.Errorf("the workers sent %d in all, want %d (the schedule)", sent, want)
	}
	if s := run.Series["orders"]; s == nil {
		t.Error("run.json has no series for orders")
	} else if tot := s.Total(); tot.Intended != want || tot.Requests != want {
		t.Errorf("merged seconds: intended %d, requests %d; want %d each", tot.Intended, tot.Requests, want)
	}
	// The fault turned on at 20 s and off at 35 s of the clock the
	// workers' schedule counts from.
	var on, off time.Duration = -1, -1
	for _, ev := range run.Events {
		if ev.Fault != "pg-pause" {
			continue
		}
		switch ev.Kind {
		case event.FaultOn:
			on = ev.At
		case event.FaultOff:
			off = ev.At
		}
	}
	near := func(got, want time.Duration) bool { return got >= want && got < want+time.Second }
	if !near(on, 20*time.Second) || !near(off, 35*time.Second) {
		t.Errorf("pg-pause on at %s, off at %s; want 20 s and 35 s after t=0", on, off)
	}
	e.requireRunGone(t, run.RunID)
}

// TestWorkersRunDrillKilledWorker: in drill run, a worker process killed
// mid-run (SIGKILL) makes the run invalid (exit 4) and ends its timeline
// there: run.json says which worker failed and why, the summary's LOAD
// WORKERS table shows it failed, and the Job and its pods are deleted.
func TestWorkersRunDrillKilledWorker(t *testing.T) {
	e := requireEnv(t)
	url := stubTarget(t)
	sc := workersScenario(t, url, 3, 30*time.Second)
	p, r := e.startDrill(t, "--kubeconfig", e.kubeconfig, "--context", contextName, "--start-margin", "15s", sc)
	runID, t0, pods := e.workerPods(t, 3, 2*time.Minute, p)
	time.Sleep(time.Until(t0.Add(8 * time.Second)))
	cid := pods[1].Status.ContainerStatuses[0].ContainerID
	pid, err := strconv.Atoi(strings.TrimPrefix(cid, "drill://"))
	if err != nil || pid <= 1 {
		t.Fatalf("worker 1's containerID %q is not drill://<pid>", cid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker 1 (pid %d): %v", pid, err)
	}
	r.wait(t, p, 3*time.Minute)
	t.Logf("drill run (exit %d):\n%s", r.code, r.summary())
	if r.code != 4 {
		t.Fatalf("exit %d, want 4 (measurement invalid)\n%s", r.code, r.stderrTail(30))
	}
	run := r.record(t)
	if len(run.LoadWorkers) != 3 || run.LoadWorkers[1].State != "failed" || !strings.Contains(run.LoadWorkers[1].Error, pods[1].Name) {
		t.Errorf("run.json load workers %+v: want 3, worker 1 failed naming its pod %s", run.LoadWorkers, pods[1].Name)
	}
	for _, lw := range run.LoadWorkers {
		if lw.Sent == 0 {
			// Killed at t=8 s, it had reported t=0..3: 4 s of its share.
			t.Errorf("load worker %d (%s): sent 0, want the requests of the seconds it reported", lw.Index, lw.State)
		}
	}
	if !strings.Contains(strings.Join(run.Validity.Problems, "; "), "worker 1 (pod "+pods[1].Name+")") {
		t.Errorf("validity problems %q do not name worker 1 and its pod", run.Validity.Problems)
	}
	if !regexp.MustCompile(`(?m)^  1\s+failed\s+` + regexp.QuoteMeta(pods[1].Name)).MatchString(r.summary()) {
		t.Errorf("the summary's LOAD WORKERS table does not show worker 1 failed:\n%s", r.summary())
	}
	// The timeline ended when the worker failed, not at its 30 s.
	for _, ev := range run.Events {
		if ev.Kind == event.PhaseStart && ev.Detail == "load-end" && ev.At >= 30*time.Second {
			t.Errorf("load-end at %s: the timeline ran on after the worker failed", ev.At)
		}
	}
	e.requireRunGone(t, runID)
}
