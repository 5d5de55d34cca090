// Package workerstest plays a Kubernetes cluster for tests of load
// workers: a fake clientset whose "Job controller" creates one Running pod
// per completion index of the workers Job it sees and runs each worker
// in-process (workers.RunWorker), its stdout the pod's log.
package workerstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/drillhq/drill/internal/workers"
)

// Fault is what goes wrong with one worker.
type Fault int

// Faults a test can give a worker.
const (
	// Healthy runs to the end.
	Healthy Fault = iota
	// Killed: the container dies after BreakAfter (pod Failed, exit 137).
	Killed
	// Silent: the process hangs after BreakAfter: its output stops, its
	// pod stays Running.
	Silent
)

// Cluster plays the Job controller and the kubelet on a fake clientset:
// for the Job it sees in Namespace, it creates one Running pod per index
// and runs the worker in-process, its stdout a pipe that Logs returns.
// Faults[i] breaks worker i after BreakAfter.
type Cluster struct {
	t *testing.T
	// Client is the cluster: a fake clientset (delete-collection of pods
	// works) from New, a real API server from NewExternal.
	Client kubernetes.Interface
	// external: a real Job controller creates the pods; Run only plays
	// their kubelet.
	external   bool
	Namespace  string
	Faults     map[int]Fault
	BreakAfter time.Duration
	// Log receives the workers' logs.
	Log *slog.Logger

	mu    sync.Mutex
	pipes map[string]*io.PipeReader
	wg    sync.WaitGroup
}

// New returns a cluster for namespace ns whose workers break as faults
// say, 1.5 s after they start.
func New(t *testing.T, ns string, faults map[int]Fault) *Cluster {
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
	return &Cluster{t: t, Client: cs, Namespace: ns, Faults: faults, BreakAfter: 1500 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler), pipes: map[string]*io.PipeReader{}}
}

// NewExternal plays the kubelet for the workers Job's pods on a real API
// server (whose Job controller creates them, and where nothing schedules
// or runs them): Run marks each pod of the role load-worker in ns Running
// and runs its worker in-process, Logs returns its output.
func NewExternal(t *testing.T, cs kubernetes.Interface, ns string, faults map[int]Fault) *Cluster {
	return &Cluster{t: t, Client: cs, Namespace: ns, Faults: faults, BreakAfter: 1500 * time.Millisecond, external: true,
		Log: slog.New(slog.DiscardHandler), pipes: map[string]*io.PipeReader{}}
}

// Logs is the workers.LogStreamer of the cluster's pods.
func (f *Cluster) Logs(ctx context.Context, ns, pod string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr := f.pipes[pod]
	if pr == nil {
		return nil, fmt.Errorf("no container log for pod %s", pod)
	}
	return pr, nil
}

func (f *Cluster) setPhase(ctx context.Context, name string, phase corev1.PodPhase, exit int32) {
	pod, err := f.Client.CoreV1().Pods(f.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return // deleted
	}
	pod.Status.Phase = phase
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason(exit)}}}}
	}
	_, _ = f.Client.CoreV1().Pods(f.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// Run waits (in the background) for the Job, then starts its pods and
// workers; they stop when ctx ends. Call Wait after ctx ended.
func (f *Cluster) Run(ctx context.Context) {
	if f.external {
		f.wg.Go(func() { f.kubelet(ctx) })
		return
	}
	f.wg.Go(func() {
		for ctx.Err() == nil {
			jobs, err := f.Client.BatchV1().Jobs(f.Namespace).List(ctx, metav1.ListOptions{})
			if err == nil && len(jobs.Items) == 1 {
				f.startPods(ctx, &jobs.Items[0].Spec.Template, jobs.Items[0].Name, int(*jobs.Items[0].Spec.Completions))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// specOf reads the workers' spec a pod template refers to.
func (f *Cluster) specOf(ctx context.Context, tpl *corev1.PodTemplateSpec) (workers.Spec, error) {
	var env string
	for _, e := range tpl.Spec.Containers[0].Env {
		if e.Name != workers.EnvSpec {
			continue
		}
		env = e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			sec, err := f.Client.CoreV1().Secrets(f.Namespace).Get(ctx, ref.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				return workers.Spec{}, fmt.Errorf("the spec's secret: %w", err)
			}
			env = sec.StringData[ref.SecretKeyRef.Key]
			if v, ok := sec.Data[ref.SecretKeyRef.Key]; ok {
				env = string(v)
			}
		}
	}
	return workers.DecodeSpec(env)
}

func (f *Cluster) startPods(ctx context.Context, tpl *corev1.PodTemplateSpec, job string, n int) {
	spec, err := f.specOf(ctx, tpl)
	if err != nil {
		f.t.Errorf("pod template: %v", err)
		return
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d-abcde", job, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: tpl.Labels,
				Annotations: map[string]string{workers.AnnotationIndex: fmt.Sprint(i)}},
			Spec:   tpl.Spec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if _, err := f.Client.CoreV1().Pods(f.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			f.t.Errorf("create pod: %v", err)
			return
		}
		f.startWorker(ctx, name, i, spec)
	}
}

// kubelet marks each new worker pod Running and runs its worker.
func (f *Cluster) kubelet(ctx context.Context) {
	started := map[string]bool{}
	for ctx.Err() == nil {
		pods, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: workers.LabelRole + "=" + workers.RoleWorker})
		if err == nil {
			for i := range pods.Items {
				pod := &pods.Items[i]
				v, ok := pod.Annotations[workers.AnnotationIndex]
				if started[pod.Name] || !ok || pod.DeletionTimestamp != nil {
					continue
				}
				started[pod.Name] = true
				var idx int
				if _, err := fmt.Sscanf(v, "%d", &idx); err != nil {
					f.t.Errorf("pod %s: index %q", pod.Name, v)
					continue
				}
				spec, err := f.specOf(ctx, &corev1.PodTemplateSpec{Spec: pod.Spec})
				if err != nil {
					f.t.Errorf("pod %s: %v", pod.Name, err)
					continue
				}
				// The log exists before the pod says Running.
				f.startWorker(ctx, pod.Name, idx, spec)
				f.setPhase(ctx, pod.Name, corev1.PodRunning, 0)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startWorker runs worker i of spec in pod name, its output a pipe Logs
// returns, broken as Faults[i] says.
func (f *Cluster) startWorker(ctx context.Context, name string, i int, spec workers.Spec) {
	{
		pr, pw := io.Pipe()
		f.mu.Lock()
		f.pipes[name] = pr
		f.mu.Unlock()
		wctx, cancel := context.WithCancel(ctx)
		var out io.Writer = pw
		switch f.Faults[i] {
		case Killed:
			time.AfterFunc(f.BreakAfter, func() {
				_ = pw.CloseWithError(errors.New("container killed"))
				cancel()
				f.setPhase(context.Background(), name, corev1.PodFailed, 137)
			})
		case Silent:
			sw := &silencer{w: pw}
			out = sw
			time.AfterFunc(f.BreakAfter, sw.silence)
		}
		f.wg.Go(func() {
			defer cancel()
			_ = workers.RunWorker(wctx, spec, i, out, nil, f.Log)
			if f.Faults[i] == Healthy {
				_ = pw.Close()
				f.setPhase(context.Background(), name, corev1.PodSucceeded, 0)
			} else if f.Faults[i] == Silent {
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

// Wait waits for every worker goroutine (after the Run context ended).
func (f *Cluster) Wait() { f.wg.Wait() }

func reason(exit int32) string {
	if exit == 0 {
		return "Completed"
	}
	return "Error"
}
