package workers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
)

// ErrWorkerFailed is wrapped by [Coordinator.Run]'s error when a worker
// failed, was evicted or deleted, never started, started too late or
// stopped reporting: the merged series lacks its share, so the run's
// measurement is invalid (the error also carries exit code 4).
var ErrWorkerFailed = errors.New("load worker failed")

// Defaults of [Coordinator].
const (
	// DefaultStallAfter: a worker silent this long (it writes a line at
	// least once a second) has stopped reporting.
	DefaultStallAfter = 5 * time.Second
	// DefaultMaxStartLate: a worker that got ready later than this after
	// its first stream's start sent its first hits late.
	DefaultMaxStartLate = 10 * time.Millisecond
	// DefaultStartGrace: a worker not ready this long after t=0 never
	// started.
	DefaultStartGrace = 10 * time.Second
	// DefaultPoll is how often the Job's pods are listed.
	DefaultPoll = 500 * time.Millisecond
)

// LogStreamer opens a pod's container log, followed (it ends when the
// container ends). [FollowLogs] is the client-go one.
type LogStreamer func(ctx context.Context, namespace, pod string) (io.ReadCloser, error)

// FollowLogs returns the LogStreamer that follows a pod's log through the
// API server (client-go GetLogs with Follow).
func FollowLogs(cs kubernetes.Interface) LogStreamer {
	return func(ctx context.Context, namespace, pod string) (io.ReadCloser, error) {
		rc, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		if err != nil {
			return nil, fmt.Errorf("follow the log of pod %s/%s: %w", namespace, pod, err)
		}
		return rc, nil
	}
}

// Coordinator runs a run's load on worker pods: one Indexed Job, its
// pods' logs merged into one series per stream. Set the fields, then call
// Run once.
type Coordinator struct {
	// Client reaches the API server; required.
	Client kubernetes.Interface
	// Job describes the Job; Job.Spec is the workers' spec.
	Job JobOptions
	// Sink receives every stream's merged seconds, each once, as one
	// engine's [load.Options.Seconds] does; required.
	Sink load.SecondSink
	// Logs opens followed pod logs; default FollowLogs(Client).
	Logs LogStreamer
	// Journal, when set, records the Job before it is created and is
	// closed once the Job is deleted ([OpenJournal]); nil records nothing.
	Journal *Journal
	// StallAfter, MaxStartLate, StartGrace, Poll and MaxClockOffset: see
	// their defaults.
	StallAfter, MaxStartLate, StartGrace, Poll, MaxClockOffset time.Duration
	// Log gets progress lines; nil discards.
	Log *slog.Logger
}

// WorkerReport is what one worker did.
type WorkerReport struct {
	Index int
	// Pod is the pod's name ("" when none was seen).
	Pod string
	// Late is how long after its first stream's start it got ready.
	Late time.Duration
	// Sent and LateRequests are the worker's own totals (from its done
	// line; for a worker that never said done, those of the seconds it
	// reported).
	Sent, LateRequests int64
	// Clock is the worker's clock measured against the API server's
	// before t=0 (nil: the worker did not measure it).
	Clock *ClockReading
	// LagP99 and LagMax are the 99th percentile and the maximum of the
	// dispatch lag (actual minus intended send time) of the requests the
	// worker reported, over all its streams and seconds; 0 before any.
	LagP99, LagMax time.Duration
	// Done says the worker said it finished its schedule.
	Done bool
	// Failed says the worker failed (Error says how); a worker neither
	// Done nor Failed was stopped because another one failed or the run
	// ended early.
	Failed bool
	// Error is the worker's own verdict on its schedule ("" when on
	// schedule), or why it failed.
	Error string
}

// Result is what the coordinator saw.
type Result struct {
	// Job is the Job's name.
	Job string
	// Workers, by index.
	Workers []WorkerReport
	// Incomplete lists the seconds not every worker reported (handed on
	// merged from those that did).
	Incomplete []string
}

// workerState is the coordinator's view of one worker.
type workerState struct {
	WorkerReport
	following bool
	readyAt   time.Duration // worker clock of its ready line
	lastAt    time.Duration // worker clock of its last status line
	// read is when its follower last read a line from its log (Unix ns),
	// written by the follower: a loop busy with a slow API call must not
	// take queued lines for silence.
	read   *atomic.Int64
	ended  bool // its log stream ended
	failed error
	// total merges every second the worker reported (for its lag).
	total *measure.Bucket
}

// msg is what a log follower sends the coordinator's loop.
type msg struct {
	worker int
	stream string
	bucket *measure.Bucket
	status *Status
	end    bool
	err    error
}

// Run creates the Job, follows its pods' logs and merges their seconds
// into Sink until every worker is done, one fails, or ctx ends; the Job
// (and its pods) is deleted on every path before Run returns. Errors: the
// Job could not be created (nothing ran); a worker failed, never started,
// started late or stopped reporting (wraps ErrWorkerFailed, exit code 4,
// naming the worker and the second); the Sink failed; ctx ended (its
// error). Result is filled as far as the run got.
func (c *Coordinator) Run(ctx context.Context) (res Result, err error) {
	c.defaults()
	spec := c.Job.Spec
	job, err := NewJob(c.Job)
	if err != nil {
		return Result{}, exitcode.Wrap(exitcode.BadInput, err)
	}
	res.Job = job.Name
	if err := c.Journal.Created(job.Namespace, job.Name, spec.RunID); err != nil {
		return res, fmt.Errorf("journal the workers' job before creating it: %w", err)
	}
	secret, err := NewSpecSecret(c.Job)
	if err != nil {
		return res, exitcode.Wrap(exitcode.BadInput, err)
	}
	_, err = c.Client.CoreV1().Secrets(job.Namespace).Create(ctx, secret, metav1.CreateOptions{})
	if err == nil {
		_, err = c.Client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	}
	if err != nil {
		// Nothing ran; the journal entry is closed only when nothing of it
		// can exist.
		if derr := c.deleteJob(job.Namespace, job.Name, spec.RunID); derr == nil {
			_ = c.Journal.Deleted()
		}
		return res, fmt.Errorf("create the workers' job %s/%s: %w", job.Namespace, job.Name, err)
	}
	c.Log.Info("workers job created", "job", job.Name, "namespace", job.Namespace, "workers", spec.Workers, "t0", spec.Start)
	defer func() {
		if derr := c.deleteJob(job.Namespace, job.Name, spec.RunID); derr != nil {
			c.Log.Error("could not delete the workers' job; drill cleanup removes it", "job", job.Name, "err", derr)
			return
		}
		if jerr := c.Journal.Deleted(); jerr != nil {
			c.Log.Warn("could not close the workers' journal entry", "err", jerr)
		}
	}()

	ws := make([]*workerState, spec.Workers)
	for i := range ws {
		ws[i] = &workerState{WorkerReport: WorkerReport{Index: i}, read: new(atomic.Int64), total: measure.NewBucket(0, 0)}
	}
	defer func() {
		for _, w := range ws {
			w.LagP99, w.LagMax = measure.Quantile(w.total.Lag, 99), measure.Quantile(w.total.Lag, 100)
			if !w.Done {
				// No done line with its totals: count what it reported.
				w.Sent, w.LateRequests = w.total.Requests, w.total.Late
			}
			res.Workers = append(res.Workers, w.WorkerReport)
		}
	}()
	mrg := newMerger(spec.Workers, c.Sink)
	msgs := make(chan msg, 256)
	follow, stopFollow := context.WithCancel(ctx)
	defer stopFollow()

	poll := time.NewTicker(c.Poll)
	defer poll.Stop()
	var fails []error
	fail := func(w *workerState, format string, a ...any) {
		if w.failed != nil {
			return
		}
		w.failed = fmt.Errorf(format, a...)
		w.Error, w.Failed = w.failed.Error(), true
		fails = append(fails, w.failed)
		c.Log.Error("load worker failed; the run is invalid", "worker", w.Index, "pod", w.Pod, "err", w.failed)
	}
	finished := func() bool {
		for _, w := range ws {
			if w.failed == nil && !(w.Done && w.ended) {
				return false
			}
		}
		return true
	}
	c.listPods(ctx, job.Namespace, spec.RunID, ws, mrg, follow, msgs, fail)
	for !finished() && len(fails) == 0 {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("workers: %w", ctx.Err())
		case m := <-msgs:
			w := ws[m.worker]
			switch {
			case m.bucket != nil:
				w.total.Merge(m.bucket) // before the merger, which keeps and merges into it
				if err := mrg.add(m.worker, m.stream, m.bucket); err != nil {
					return res, fmt.Errorf("workers: hand on a merged second: %w", err)
				}
			case m.status != nil:
				c.status(w, m.status, fail)
			case m.end:
				w.ended = true
				if !w.Done {
					last := c.lastReported(mrg, w)
					if m.err != nil {
						fail(w, "worker %d (pod %s) stopped at t=%s: its log stream broke (%s): %w", w.Index, w.Pod, w.lastAt.Truncate(time.Second), last, m.err)
					} else {
						fail(w, "worker %d (pod %s) stopped at t=%s: its output ended before it said done (%s)", w.Index, w.Pod, w.lastAt.Truncate(time.Second), last)
					}
				}
			}
		case <-poll.C:
			c.listPods(ctx, job.Namespace, spec.RunID, ws, mrg, follow, msgs, fail)
			c.checkJob(ctx, job.Namespace, job.Name, ws, mrg, fail)
			now := time.Now()
			for _, w := range ws {
				switch {
				case w.failed != nil || (w.Done && w.ended):
				case w.read.Load() == 0:
					if now.After(spec.Start.Add(spec.FirstStart() + c.StartGrace)) {
						fail(w, "worker %d never started: no output %s after t=0 (pod %s)", w.Index, spec.FirstStart()+c.StartGrace, orNone(w.Pod))
					}
				case now.Sub(time.Unix(0, w.read.Load())) > c.StallAfter:
					fail(w, "worker %d (pod %s) stopped reporting at t=%s: nothing from it for %s (%s)", w.Index, w.Pod,
						w.lastAt.Truncate(time.Second), c.StallAfter, c.lastReported(mrg, w))
				}
			}
		}
	}
	stopFollow()
	inc, ferr := mrg.flush()
	res.Incomplete = inc
	if ferr != nil {
		fails = append(fails, fmt.Errorf("hand on a merged second: %w", ferr))
	}
	if len(fails) > 0 {
		return res, exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("%w: %w", ErrWorkerFailed, errors.Join(fails...)))
	}
	if len(inc) > 0 {
		return res, exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("%w: seconds not every worker reported: %s", ErrWorkerFailed, strings.Join(inc, "; ")))
	}
	return res, nil
}

func (c *Coordinator) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Logs == nil {
		c.Logs = FollowLogs(c.Client)
	}
	if c.StallAfter <= 0 {
		c.StallAfter = DefaultStallAfter
	}
	if c.MaxStartLate <= 0 {
		c.MaxStartLate = DefaultMaxStartLate
	}
	if c.StartGrace <= 0 {
		c.StartGrace = DefaultStartGrace
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.MaxClockOffset <= 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
}

func orNone(s string) string {
	if s == "" {
		return "none created"
	}
	return s
}

// lastReported says which second a worker last reported.
func (c *Coordinator) lastReported(m *merger, w *workerState) string {
	if last, ok := m.lastSecond(w.Index); ok {
		return fmt.Sprintf("its last second was t=%s..%s", last, last+time.Second)
	}
	return "it reported no second"
}

// status takes a worker's status line.
func (c *Coordinator) status(w *workerState, s *Status, fail func(*workerState, string, ...any)) {
	w.lastAt = s.At
	switch s.Event {
	case EventReady:
		w.readyAt, w.Late = s.At, s.Late
		if s.Late > c.MaxStartLate {
			fail(w, "worker %d (pod %s) started too late: ready %s after its first stream's start (bound %s)", w.Index, w.Pod, s.Late, c.MaxStartLate)
		}
		w.Clock = s.Clock
		if s.Clock.Beyond(c.MaxClockOffset) {
			fail(w, "worker %d (pod %s): its node's clock is %s off the API server's (bound %s): its requests would go out off the shared schedule", w.Index, w.Pod, s.Clock, c.MaxClockOffset)
		}
	case EventDone:
		w.Done = true
		w.Sent, w.LateRequests = s.Sent, s.LateRequests
		if s.Error != "" {
			w.Error = s.Error
		}
		c.Log.Info("load worker done", "worker", w.Index, "sent", s.Sent, "late", s.LateRequests)
	}
}

// listPods lists the run's pods, starts following the log of each pod
// whose container has started, and fails workers whose pod failed or
// vanished before they were done.
func (c *Coordinator) listPods(ctx context.Context, ns, runID string, ws []*workerState, m *merger, follow context.Context, msgs chan<- msg, fail func(*workerState, string, ...any)) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: RunSelector(runID)})
	if err != nil {
		c.Log.Warn("list the workers' pods", "err", err)
		return
	}
	seen := make([]bool, len(ws))
	for i := range pods.Items {
		pod := &pods.Items[i]
		idx, err := podIndex(pod)
		if err != nil || idx < 0 || idx >= len(ws) {
			continue
		}
		w := ws[idx]
		if w.Pod != "" && w.Pod != pod.Name {
			if !w.Done {
				fail(w, "worker %d: its pod %s was replaced by %s (a replacement would send its hits twice)", idx, w.Pod, pod.Name)
			}
			continue
		}
		seen[idx] = true
		w.Pod = pod.Name
		if pod.DeletionTimestamp != nil && !w.Done {
			fail(w, "worker %d (pod %s) is being deleted at t=%s", idx, pod.Name, w.lastAt.Truncate(time.Second))
		}
		started := pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
		if started && !w.following {
			w.following = true
			go c.follow(follow, ns, pod.Name, idx, w.read, msgs)
		}
		if pod.Status.Phase == corev1.PodFailed && !w.Done {
			fail(w, "worker %d (pod %s) failed at t=%s: %s (%s)", idx, pod.Name, w.lastAt.Truncate(time.Second), podReason(pod), c.lastReported(m, w))
		}
	}
	for i, w := range ws {
		if w.Pod != "" && !seen[i] && !w.Done {
			fail(w, "worker %d: its pod %s disappeared at t=%s", i, w.Pod, w.lastAt.Truncate(time.Second))
		}
	}
}

// checkJob fails every unfinished worker when the Job failed (deadline
// exceeded, backoff limit).
func (c *Coordinator) checkJob(ctx context.Context, ns, name string, ws []*workerState, m *merger, fail func(*workerState, string, ...any)) {
	job, err := c.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			for _, w := range ws {
				if !w.Done {
					fail(w, "worker %d: the workers' job %s was deleted at t=%s (%s)", w.Index, name, w.lastAt.Truncate(time.Second), c.lastReported(m, w))
				}
			}
		}
		return
	}
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			for _, w := range ws {
				if !w.Done {
					fail(w, "worker %d (pod %s): the workers' job failed at t=%s: %s: %s", w.Index, orNone(w.Pod), w.lastAt.Truncate(time.Second), cond.Reason, cond.Message)
				}
			}
		}
	}
}

func podReason(pod *corev1.Pod) string {
	parts := []string{}
	if pod.Status.Reason != "" {
		parts = append(parts, pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		parts = append(parts, pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason))
		}
	}
	if len(parts) == 0 {
		return "phase Failed"
	}
	return strings.Join(parts, ": ")
}

// follow reads a pod's log lines and sends them on, storing when it read
// each in read; it sends an end message when the log ends.
func (c *Coordinator) follow(ctx context.Context, ns, pod string, idx int, read *atomic.Int64, msgs chan<- msg) {
	send := func(m msg) bool {
		select {
		case msgs <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	rc, err := c.Logs(ctx, ns, pod)
	if err != nil {
		send(msg{worker: idx, end: true, err: err})
		return
	}
	defer rc.Close()
	// A pod's log holds its stderr too (a kubelet serves both streams as
	// one): the worker's own log lines are passed over.
	jl := &journalLines{br: bufio.NewReaderSize(rc, 64<<10), other: func(line []byte) {
		c.Log.Debug("load worker says", "worker", idx, "line", strings.TrimSpace(string(line)))
	}}
	err = measure.ReadJournal(jl, measure.JournalReader{
		Second: func(stream string, b *measure.Bucket) error {
			read.Store(time.Now().UnixNano())
			if !send(msg{worker: idx, stream: stream, bucket: b}) {
				return ctx.Err()
			}
			return nil
		},
		Data: func(kind string, data json.RawMessage) error {
			read.Store(time.Now().UnixNano())
			if kind != KindWorker {
				return nil
			}
			var s Status
			if err := json.Unmarshal(data, &s); err != nil {
				return fmt.Errorf("worker line: %w", err)
			}
			if !send(msg{worker: idx, status: &s}) {
				return ctx.Err()
			}
			return nil
		},
	})
	if ctx.Err() != nil {
		return
	}
	send(msg{worker: idx, end: true, err: err})
}

// deleteJob deletes the Job and the run's pods (the pods too, in case no
// garbage collector runs), with a fresh timeout: it runs on every exit
// path, also after ctx ended. Not found is not an error.
func (c *Coordinator) deleteJob(ns, name, runID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return DeleteJob(ctx, c.Client, ns, name, runID)
}

// DeleteJob deletes a run's workers Job (background propagation), its
// spec Secret (of the same name) and every pod labelled with the run, and
// waits (up to ctx) until the API server lists none of them. Not found is
// not an error.
func DeleteJob(ctx context.Context, cs kubernetes.Interface, ns, name, runID string) error {
	bg := metav1.DeletePropagationBackground
	zero := int64(0)
	err := cs.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s/%s: %w", ns, name, err)
	}
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s/%s: %w", ns, name, err)
	}
	sel := metav1.ListOptions{LabelSelector: RunSelector(runID)}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the pods of job %s/%s: %w", ns, name, err)
	}
	for {
		_, jerr := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		pods, perr := cs.CoreV1().Pods(ns).List(ctx, sel)
		if apierrors.IsNotFound(jerr) && perr == nil && len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete job %s/%s: still there: %w", ns, name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// journalLines reads the journal lines (JSON objects, one a line) of a
// pod's log and hands every other line to other: a kubelet serves a
// container's stdout and stderr as one stream, and the worker logs on
// stderr.
type journalLines struct {
	br      *bufio.Reader
	pending []byte
	other   func(line []byte)
}

// Read implements io.Reader.
func (j *journalLines) Read(p []byte) (int, error) {
	for len(j.pending) == 0 {
		line, err := j.br.ReadBytes('\n')
		if len(line) > 0 {
			if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '{' {
				j.pending = line
			} else if len(bytes.TrimSpace(line)) > 0 {
				j.other(line)
			}
		}
		if err != nil {
			if len(j.pending) == 0 {
				return 0, err
			}
			break
		}
	}
	n := copy(p, j.pending)
	j.pending = j.pending[n:]
	return n, nil
}
