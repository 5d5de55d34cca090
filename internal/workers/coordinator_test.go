package workers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
	"github.com/drillhq/drill/internal/workers/workerstest"
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

func testSpec(url string, n int) workers.Spec {
	return workers.Spec{
		RunID:   "r1.test",
		Workers: n,
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

// coordRun is what runCoordinator saw.
type coordRun struct {
	res   workers.Result
	sink  *collectSink
	fc    *workerstest.Cluster
	spec  workers.Spec
	state string
}

func runCoordinator(t *testing.T, faults map[int]workerstest.Fault, cancelAfter ...time.Duration) (coordRun, error) {
	t.Helper()
	fc := workerstest.New(t, testNS, faults)
	fc.Log = testLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); fc.Wait() }()
	fc.Run(ctx)
	spec := testSpec(stub(t), 3)
	state := t.TempDir()
	j, err := workers.OpenJournal(state, spec.RunID, "", "drill-test")
	if err != nil {
		t.Fatal(err)
	}
	sink := &collectSink{}
	c := &workers.Coordinator{
		Client:     fc.Client,
		Job:        workers.JobOptions{Namespace: testNS, Image: "drill:test", Spec: spec},
		Sink:       sink,
		Logs:       fc.Logs,
		Journal:    j,
		StallAfter: 1500 * time.Millisecond,
		Poll:       100 * time.Millisecond,
		// Workers in one test process on a busy machine: generous bounds.
		MaxStartLate: 500 * time.Millisecond,
		Log:          testLog(t),
	}
	runCtx := ctx
	if len(cancelAfter) > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(ctx, cancelAfter[0])
		defer stop()
	}
	res, err := c.Run(runCtx)
	return coordRun{res: res, sink: sink, fc: fc, spec: spec, state: state}, err
}

// requireNothingLeft: no Job, no pod, no journal entry of the run.
func requireNothingLeft(t *testing.T, cs kubernetes.Interface, state string) {
	t.Helper()
	ctx := context.Background()
	jobs, _ := cs.BatchV1().Jobs(testNS).List(ctx, metav1.ListOptions{})
	pods, _ := cs.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	secrets, _ := cs.CoreV1().Secrets(testNS).List(ctx, metav1.ListOptions{})
	if len(jobs.Items)+len(pods.Items)+len(secrets.Items) > 0 {
		t.Errorf("left behind %d jobs, %d pods and %d secrets", len(jobs.Items), len(pods.Items), len(secrets.Items))
	}
	if entries, _ := workers.ReadJournals(state, ""); len(entries) > 0 {
		t.Errorf("workers journal still has %v", entries)
	}
}

// TestCoordinatorMergesWorkers: three workers on a stub target; the merged
// series has exactly the one-process schedule's intended count, each
// second handed on once, every request answered; the Job, its pods and
// the journal entry are gone afterwards.
func TestCoordinatorMergesWorkers(t *testing.T) {
	r, err := runCoordinator(t, nil)
	res, sink, fc, spec, state := r.res, r.sink, r.fc, r.spec, r.state
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
	requireNothingLeft(t, fc.Client, state)
}

// TestCoordinatorWorkerFailures: a killed worker and a worker that stops
// reporting each make the run invalid (exit 4), naming the worker; the Job
// is deleted all the same.
func TestCoordinatorWorkerFailures(t *testing.T) {
	tests := []struct {
		name   string
		faults map[int]workerstest.Fault
		want   []string
	}{
		{"killed", map[int]workerstest.Fault{1: workerstest.Killed}, []string{"worker 1", "pod drill-r1-test-workers-1-abcde"}},
		{"silent", map[int]workerstest.Fault{2: workerstest.Silent}, []string{"worker 2", "pod drill-r1-test-workers-2-abcde", "stopped reporting at t="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runCoordinator(t, tc.faults)
			fc, state := r.fc, r.state
			if !errors.Is(err, workers.ErrWorkerFailed) {
				t.Fatalf("Run: %v, want workers.ErrWorkerFailed", err)
			}
			if got := exitcode.Code(err); got != exitcode.InvalidMeasurement {
				t.Errorf("exit code %d, want %d", got, exitcode.InvalidMeasurement)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			requireNothingLeft(t, fc.Client, state)
		})
	}
}

// TestCoordinatorStoppedDeletesJob: a run stopped mid-load (Ctrl-C, the
// stop ladder) returns its context's error and still deletes the Job, its
// pods and the journal entry.
func TestCoordinatorStoppedDeletesJob(t *testing.T) {
	r, err := runCoordinator(t, nil, 1500*time.Millisecond)
	fc, state := r.fc, r.state
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the context's error", err)
	}
	requireNothingLeft(t, fc.Client, state)
}

// TestCleanupDeletesJournaledJob: a Job journaled by a run that was
// killed is deleted by workers.Cleanup, pods and journal entry too.
func TestCleanupDeletesJournaledJob(t *testing.T) {
	fc := workerstest.New(t, testNS, nil)
	ctx := context.Background()
	spec := testSpec("http://127.0.0.1:9", 2)
	job, err := workers.NewJob(workers.JobOptions{Namespace: testNS, Image: "drill:test", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	j, _ := workers.OpenJournal(state, spec.RunID, "/k", "drill-test")
	if err := j.Created(testNS, job.Name, spec.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Client.BatchV1().Jobs(testNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec, err := workers.NewSpecSecret(workers.JobOptions{Namespace: testNS, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Client.CoreV1().Secrets(testNS).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-0-x", Namespace: testNS, Labels: job.Spec.Template.Labels}}
	if _, err := fc.Client.CoreV1().Pods(testNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gotCtx string
	removed, err := workers.Cleanup(ctx, state, "", func(kubeconfig, kctx string) (kubernetes.Interface, error) {
		gotCtx = kubeconfig + "|" + kctx
		return fc.Client, nil
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
	requireNothingLeft(t, fc.Client, state)
	if _, err := os.Stat(filepath.Join(workers.JournalDir(state), spec.RunID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal file still there: %v", err)
	}
}
