package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

const testNS = "drill"

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// stub is a loopback HTTP target that answers 200 at once.
func stub(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func testSpec(url string, workers int) Spec {
	return Spec{
		RunID:   "r1.test",
		Workers: workers,
		Start:   time.Now().Add(700 * time.Millisecond),
		Streams: []scenario.Stream{{
			Name:      "orders",
			Targets:   []scenario.Target{{Method: "POST", URL: url, Body: `{"id":"{{.ID}}"}`}},
			Rate:      &scenario.Rate{Freq: 250, Per: time.Second},
			Duration:  scenario.Duration{Duration: 3 * time.Second},
			Timeout:   scenario.Duration{Duration: time.Second},
			LagBudget: &scenario.LagBudget{Late: scenario.Duration{Duration: 200 * time.Millisecond}, Fraction: 0.2},
		}},
	}
}

// collectSink gathers the merged seconds and counts how often each second
// came as a first (Intended > 0) delivery.
type collectSink struct {
	sb    measure.SeriesBuilder
	first map[time.Duration]int
}

func (s *collectSink) WriteSecond(stream string, b *measure.Bucket) error {
	if s.first == nil {
		s.first = map[time.Duration]int{}
	}
	if b.Intended > 0 {
		s.first[b.Start]++
	}
	s.sb.Add(stream, b) // the merger hands on buckets it no longer uses
	return nil
}

// worker faults a test can inject.
type fault int

const (
	healthy fault = iota
	killed        // the container dies mid-run (pod Failed, exit 137)
	silent        // the process hangs: its output stops, its pod stays Running
)

// fakeJobController plays the Job controller and the kubelet on a fake
// clientset: for the Job it sees, it creates one Running pod per index
// and runs the worker in-process, its stdout a pipe that the LogStreamer
// returns. faults[i] breaks worker i after breakAfter.
type fakeJobController struct {
	t          *testing.T
	cs         *fake.Clientset
	faults     map[int]fault
	breakAfter time.Duration

	mu    sync.Mutex
	pipes map[string]*io.PipeReader
	wg    sync.WaitGroup
}

func newFakeCluster(t *testing.T, faults map[int]fault) *fakeJobController {
	cs := fake.NewClientset()
	// The fake tracker has no delete-collection: delete the matching pods.
	cs.PrependReactor("delete-collection", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		dc := a.(k8stesting.DeleteCollectionAction)
		sel, err := labels.Parse(dc.GetListRestrictions().Labels.String())
		if err != nil {
			return true, nil, err
		}
		obj, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, p := range obj.(*corev1.PodList).Items {
			if sel.Matches(labels.Set(p.Labels)) {
				_ = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name)
			}
		}
		return true, nil, nil
	})
	return &fakeJobController{t: t, cs: cs, faults: faults, breakAfter: 1500 * time.Millisecond, pipes: map[string]*io.PipeReader{}}
}

func (f *fakeJobController) logs(ctx context.Context, ns, pod string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr := f.pipes[pod]
	if pr == nil {
		return nil, fmt.Errorf("no container log for pod %s", pod)
	}
	return pr, nil
}

func (f *fakeJobController) setPhase(ctx context.Context, name string, phase corev1.PodPhase, exit int32) {
	pod, err := f.cs.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return // deleted
	}
	pod.Status.Phase = phase
	if exit != 0 {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error"}}}}
	}
	_, _ = f.cs.CoreV1().Pods(testNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// run waits for the Job, then starts its pods and workers.
func (f *fakeJobController) run(ctx context.Context) {
	f.wg.Go(func() {
		for ctx.Err() == nil {
			jobs, err := f.cs.BatchV1().Jobs(testNS).List(ctx, metav1.ListOptions{})
			if err == nil && len(jobs.Items) == 1 {
				f.startPods(ctx, &jobs.Items[0].Spec.Template, jobs.Items[0].Name, int(*jobs.Items[0].Spec.Completions))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func (f *fakeJobController) startPods(ctx context.Context, tpl *corev1.PodTemplateSpec, job string, n int) {
	var env string
	for _, e := range tpl.Spec.Containers[0].Env {
		if e.Name == EnvSpec {
			env = e.Value
		}
	}
	spec, err := DecodeSpec(env)
	if err != nil {
		f.t.Errorf("pod template: %v", err)
		return
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d-abcde", job, i)
		pr, pw := io.Pipe()
		f.mu.Lock()
		f.pipes[name] = pr
		f.mu.Unlock()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: tpl.Labels,
				Annotations: map[string]string{AnnotationIndex: fmt.Sprint(i)}},
			Spec:   tpl.Spec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if _, err := f.cs.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			f.t.Errorf("create pod: %v", err)
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		var out io.Writer = pw
		switch f.faults[i] {
		case killed:
			time.AfterFunc(f.breakAfter, func() {
				_ = pw.CloseWithError(errors.New("container killed"))
				cancel()
				f.setPhase(context.Background(), name, corev1.PodFailed, 137)
			})
		case silent:
			sw := &silencer{w: pw}
			out = sw
			time.AfterFunc(f.breakAfter, sw.silence)
		}
		f.wg.Go(func() {
			defer cancel()
			_ = RunWorker(wctx, spec, i, out, testLog(f.t))
			if f.faults[i] == healthy {
				_ = pw.Close()
				f.setPhase(context.Background(), name, corev1.PodSucceeded, 0)
			} else if f.faults[i] == silent {
				<-ctx.Done() // hangs: output never ends
				_ = pw.Close()
			}
		})
	}
}

// silencer passes writes on until silenced, then swallows them.
type silencer struct {
	mu     sync.Mutex
	w      io.Writer
	silent bool
}

func (s *silencer) silence() { s.mu.Lock(); s.silent = true; s.mu.Unlock() }

func (s *silencer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent {
		return len(p), nil
	}
	return s.w.Write(p)
}

func runCoordinator(t *testing.T, faults map[int]fault) (Result, error, *collectSink, *fakeJobController, Spec, string) {
	t.Helper()
	fc := newFakeCluster(t, faults)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); fc.wg.Wait() }()
	fc.run(ctx)
	spec := testSpec(stub(t), 3)
	state := t.TempDir()
	j, err := OpenJournal(state, spec.RunID, "", "drill-test")
	if err != nil {
		t.Fatal(err)
	}
	sink := &collectSink{}
	c := &Coordinator{
		Client:     fc.cs,
		Job:        JobOptions{Namespace: testNS, Image: "drill:test", Spec: spec},
		Sink:       sink,
		Logs:       fc.logs,
		Journal:    j,
		StallAfter: 1500 * time.Millisecond,
		Poll:       100 * time.Millisecond,
		// Workers in one test process on a busy machine: generous bounds.
		MaxStartLate: 300 * time.Millisecond,
		Log:          testLog(t),
	}
	res, err := c.Run(ctx)
	return res, err, sink, fc, spec, state
}

// requireNothingLeft: no Job, no pod, no journal entry of the run.
func requireNothingLeft(t *testing.T, cs kubernetes.Interface, state string) {
	t.Helper()
	ctx := context.Background()
	jobs, _ := cs.BatchV1().Jobs(testNS).List(ctx, metav1.ListOptions{})
	pods, _ := cs.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	if len(jobs.Items)+len(pods.Items) > 0 {
		t.Errorf("left behind %d jobs and %d pods", len(jobs.Items), len(pods.Items))
	}
	if entries, _ := ReadJournals(state, ""); len(entries) > 0 {
		t.Errorf("workers journal still has %v", entries)
	}
}

// TestCoordinatorMergesWorkers: three workers on a stub target; the merged
// series has exactly the one-process schedule's intended count, each
// second handed on once, every request answered; the Job, its pods and
// the journal entry are gone afterwards.
func TestCoordinatorMergesWorkers(t *testing.T) {
	res, err, sink, fc, spec, state := runCoordinator(t, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	ser := sink.sb.Series()["orders"]
	if ser == nil {
		t.Fatal("no merged series for stream orders")
	}
	var intended, requests, ok int64
	for _, b := range ser.Buckets {
		intended += b.Intended
		requests += b.Requests
		ok += b.OK
	}
	const want = 750 // 250/s for 3 s
	if intended != want || requests != want || ok != want {
		t.Errorf("merged intended %d, requests %d, ok %d; want %d each", intended, requests, ok, want)
	}
	// Seconds on the shared clock: the stream starts at t=0, so t=0,1,2
	// hold 250 each, each handed on once.
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second} {
		if sink.first[at] != 1 {
			t.Errorf("second t=%s handed on %d times, want once", at, sink.first[at])
		}
	}
	for _, b := range ser.Buckets {
		if b.Intended != 250 {
			t.Errorf("second t=%s: intended %d, want 250", b.Start, b.Intended)
		}
	}
	if len(res.Workers) != spec.Workers {
		t.Fatalf("result has %d workers, want %d", len(res.Workers), spec.Workers)
	}
	var sent int64
	for _, w := range res.Workers {
		if !w.Done || w.Pod == "" {
			t.Errorf("worker %d: done %v, pod %q", w.Index, w.Done, w.Pod)
		}
		sent += w.Sent
	}
	if sent != want {
		t.Errorf("workers sent %d in all, want %d", sent, want)
	}
	requireNothingLeft(t, fc.cs, state)
}

// TestCoordinatorWorkerFailures: a killed worker and a worker that stops
// reporting each make the run invalid (exit 4), naming the worker; the Job
// is deleted all the same.
func TestCoordinatorWorkerFailures(t *testing.T) {
	tests := []struct {
		name   string
		faults map[int]fault
		want   []string
	}{
		{"killed", map[int]fault{1: killed}, []string{"worker 1", "pod drill-r1-test-workers-1-abcde"}},
		{"silent", map[int]fault{2: silent}, []string{"worker 2", "pod drill-r1-test-workers-2-abcde", "stopped reporting at t="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err, _, fc, _, state := runCoordinator(t, tc.faults)
			if !errors.Is(err, ErrWorkerFailed) {
				t.Fatalf("Run: %v, want ErrWorkerFailed", err)
			}
			if got := exitcode.Code(err); got != exitcode.InvalidMeasurement {
				t.Errorf("exit code %d, want %d", got, exitcode.InvalidMeasurement)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			requireNothingLeft(t, fc.cs, state)
		})
	}
}

// TestCleanupDeletesJournaledJob: a Job journaled by a run that was
// killed is deleted by Cleanup, pods and journal entry too.
func TestCleanupDeletesJournaledJob(t *testing.T) {
	fc := newFakeCluster(t, nil)
	ctx := context.Background()
	spec := testSpec("http://127.0.0.1:9", 2)
	job, err := NewJob(JobOptions{Namespace: testNS, Image: "drill:test", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	j, _ := OpenJournal(state, spec.RunID, "/k", "drill-test")
	if err := j.created(testNS, job.Name, spec.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.cs.BatchV1().Jobs(testNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-0-x", Namespace: testNS, Labels: job.Spec.Template.Labels}}
	if _, err := fc.cs.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gotCtx string
	removed, err := Cleanup(ctx, state, "", func(kubeconfig, kctx string) (kubernetes.Interface, error) {
		gotCtx = kubeconfig + "|" + kctx
		return fc.cs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotCtx != "/k|drill-test" {
		t.Errorf("cleanup connected to %q", gotCtx)
	}
	if len(removed) != 1 || !strings.Contains(removed[0], job.Name) {
		t.Errorf("removed %v", removed)
	}
	requireNothingLeft(t, fc.cs, state)
	if _, err := os.Stat(filepath.Join(JournalDir(state), spec.RunID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal file still there: %v", err)
	}
}
