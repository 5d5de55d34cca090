package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
)

// podRun is one pod the agent runs (or tried to run).
type podRun struct {
	key, ns, name string
	uid           types.UID
	ip            string
	hostIP        string
	port          int
	grace         time.Duration
	created       time.Time

	// Set by start; read under mu.
	mu          sync.Mutex
	rep         *localenv.Replica
	view        podView
	lastPod     *corev1.Pod // the pod as the agent last wrote it
	logFile     *os.File
	outFile     *os.File // the container's own output, served as its log
	outPath     string
	unsupported bool
	lastTry     time.Time
	terminating bool

	dirty       chan struct{} // cap 1: the status needs writing
	stopWriter  context.CancelFunc
	writerDone  chan struct{}
	releaseOnce sync.Once
}

func (r *podRun) replica() *localenv.Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rep
}

// changed marks the status dirty (non-blocking).
func (r *podRun) changed() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

func (r *podRun) markStopped() {
	// The replica's lock is taken outside r.mu: OnChange takes them in the
	// other order.
	var st *localenv.ReplicaStatus
	if rep := r.replica(); rep != nil {
		s := rep.Status()
		st = &s
	}
	r.mu.Lock()
	r.view.stopped = true
	if st != nil {
		r.view.replica = st
	}
	r.mu.Unlock()
}

func (r *podRun) closeLog() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logFile != nil {
		_ = r.logFile.Close()
		r.logFile = nil
	}
	if r.outFile != nil {
		_ = r.outFile.Close()
		r.outFile = nil
	}
}

// stopProcess stops the replica (SIGTERM, SIGKILL when ctx ends) and waits
// for its processes to be reaped.
func (r *podRun) stopProcess(ctx context.Context, log *slog.Logger) {
	rep := r.replica()
	if rep == nil {
		return
	}
	if err := rep.Stop(ctx); err != nil {
		log.Warn("stop pod", "pod", r.key, "err", err)
	}
}

// adopt registers pod as run by this agent: it gets a pod IP and a
// loopback port, and a status writer starts.
func (a *Agent) adopt(pod *corev1.Pod) *podRun {
	key := pod.Namespace + "/" + pod.Name
	grace := localenv.DefaultGrace
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	r := &podRun{
		key: key, ns: pod.Namespace, name: pod.Name, uid: pod.UID,
		hostIP: a.cfg.NodeIP, grace: grace, created: time.Now(),
		dirty: make(chan struct{}, 1), writerDone: make(chan struct{}),
	}
	r.view = podView{hostIP: a.cfg.NodeIP, startTime: r.created}
	if len(pod.Spec.Containers) > 0 {
		r.view.container, r.view.image = pod.Spec.Containers[0].Name, pod.Spec.Containers[0].Image
	}
	ip, err := a.ips.allocate(key)
	if err != nil {
		r.unsupported = true
		r.view.waitingReason, r.view.waitingMessage = "CreateContainerError", err.Error()
	}
	r.ip, r.view.podIP = ip, ip
	a.mu.Lock()
	a.pods[key] = r
	if ip != "" {
		a.byIP[ip] = r
	}
	a.mu.Unlock()
	wctx, cancel := context.WithCancel(a.ctx)
	r.stopWriter = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(r.writerDone)
		a.statusWriter(wctx, r)
	}()
	r.changed()
	return r
}

// start resolves the pod's container and starts its process. A pod that
// cannot be started keeps a waiting status (CreateContainerConfigError)
// and is tried again later unless it can never run here.
func (a *Agent) start(r *podRun, pod *corev1.Pod) {
	r.mu.Lock()
	r.lastTry = time.Now()
	r.mu.Unlock()
	if r.ip == "" {
		return
	}
	fail := func(reason string, err error) {
		r.mu.Lock()
		r.view.waitingReason, r.view.waitingMessage = reason, err.Error()
		r.unsupported = errors.Is(err, errUnsupported)
		r.mu.Unlock()
		r.changed()
		a.podEvent(r, r.view.container, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		a.log.Warn("cannot start pod", "pod", r.key, "err", err)
		if !errors.Is(err, errUnsupported) {
			a.queue.AddAfter(r.key, configRetry)
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	spec, err := buildProcessSpec(ctx, pod, r.ip, r.hostIP, a.cfg.Executable, a.refs)
	cancel()
	if err != nil {
		fail("CreateContainerConfigError", err)
		return
	}
	port, err := freeLoopbackPort(a.ports)
	if err != nil {
		fail("CreateContainerError", err)
		return
	}
	a.mu.Lock() // reroute reads the port under a.mu
	r.port = port
	a.mu.Unlock()
	env := os.Environ()
	if host, port, err := net.SplitHostPort(a.cfg.APIServer); err == nil {
		env = append(env, "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port)
	}
	env = append(env, spec.env...)
	env = append(env, "PORT="+strconv.Itoa(port))
	r.mu.Lock()
	if r.logFile == nil {
		f, err := os.OpenFile(filepath.Join(a.cfg.LogDir, r.ns+"_"+r.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			r.mu.Unlock()
			fail("CreateContainerError", fmt.Errorf("open pod log: %w", err))
			return
		}
		r.logFile = f
	}
	if r.outFile == nil {
		// What the kubelet API serves as the container's log: its output
		// only, appended across restarts.
		dir := filepath.Join(a.cfg.LogDir, "containers")
		path := filepath.Join(dir, r.ns+"_"+r.name+"_"+spec.container+".log")
		err := os.MkdirAll(dir, 0o755)
		var f *os.File
		if err == nil {
			f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
		if err != nil {
			r.mu.Unlock()
			fail("CreateContainerError", fmt.Errorf("open container log: %w", err))
			return
		}
		r.outFile, r.outPath = f, path
	}
	logFile, outFile := r.logFile, r.outFile
	r.mu.Unlock()
	rep, err := localenv.NewReplica(localenv.ReplicaConfig{
		Service: r.ns, Pod: r.name, Container: spec.container,
		Command: spec.argv, Env: env, Port: port, Probes: spec.probes, Grace: r.grace, PreStop: spec.preStop,
		Logs: logFile, Output: outFile, RestartPolicy: string(pod.Spec.RestartPolicy),
		Options: a.cfg.Runtime, Clock: a.clock,
		Sink: event.SinkFunc(func(e event.Event) { a.replicaEvent(r, spec.container, e) }),
		Log:  a.log,
		OnChange: func(st localenv.ReplicaStatus) {
			r.mu.Lock()
			r.view.replica = &st
			r.mu.Unlock()
			r.changed()
		},
	})
	if err != nil {
		fail("CreateContainerConfigError", fmt.Errorf("%w: %w", err, errUnsupported))
		return
	}
	r.mu.Lock()
	r.rep = rep
	r.mu.Unlock()
	// The replica lives until terminate stops it, not until a.ctx ends:
	// shutdown stops it with the grace period.
	if err := rep.Start(context.Background()); err != nil {
		r.mu.Lock()
		r.rep = nil
		r.mu.Unlock()
		fail("RunContainerError", err)
		return
	}
	r.mu.Lock()
	r.view.waitingReason, r.view.waitingMessage = "", ""
	r.mu.Unlock()
	a.log.Info("pod started", "pod", r.key, "ip", r.ip, "port", port, "argv", strings.Join(spec.argv, " "))
	a.rerouteAll()
}

// deleteProcess ends r's process as the kubelet ends a deleted pod's
// container ([localenv.Replica.Delete]): a Killing event, the preStop
// sleep, SIGTERM, SIGKILL once grace is over (the preStop sleep included;
// at least [localenv.MinGrace] after SIGTERM), and waits until it is
// reaped. Should the runtime not have reaped it 10 s after the grace, it
// is killed at once.
func (r *podRun) deleteProcess(grace time.Duration, why string, log *slog.Logger) {
	rep := r.replica()
	if rep == nil {
		return
	}
	rep.Delete(localenv.DeleteOptions{Grace: grace, Reason: why})
	t := time.NewTimer(grace + localenv.MinGrace + 10*time.Second)
	defer t.Stop()
	select {
	case <-rep.Done():
		return
	case <-t.C:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // force
	if err := rep.Stop(ctx); err != nil {
		log.Warn("stop pod", "pod", r.key, "err", err)
	}
}

// terminate ends r's process as the kubelet ends a deleted pod's
// container (see [podRun.deleteProcess]; grace 0 means the container's
// own terminationGracePeriodSeconds), keeps its Service endpoints routed
// for the endpoint lag ([Config.EndpointLag]) and forgets the pod; with
// confirm, it then deletes the pod with grace 0 as the kubelet confirms a
// graceful deletion. It returns at once; the work runs in the background.
func (a *Agent) terminate(r *podRun, grace time.Duration, confirm bool, why string) {
	r.mu.Lock()
	if r.terminating {
		r.mu.Unlock()
		return
	}
	r.terminating = true
	r.mu.Unlock()
	if grace <= 0 {
		grace = r.grace
	}
	grace = max(grace, localenv.MinGrace)
	a.log.Info("stopping pod", "pod", r.key, "why", why, "grace", grace)
	a.lagDeletion(r)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		r.deleteProcess(grace, why, a.log)
		r.stopWriter()
		<-r.writerDone
		r.closeLog()
		// Delete before forgetting the pod, so that an update arriving
		// meanwhile finds it still terminating rather than starts it again.
		if confirm {
			a.confirmDeletion(r)
		}
		a.release(r)
	}()
}

// release returns r's address and forgets it (if still the current run of
// its key).
func (a *Agent) release(r *podRun) {
	r.releaseOnce.Do(func() {
		a.mu.Lock()
		if a.pods[r.key] == r {
			delete(a.pods, r.key)
		}
		if r.ip != "" && a.byIP[r.ip] == r {
			delete(a.byIP, r.ip)
		}
		a.mu.Unlock()
		a.ips.release(r.ip)
		a.rerouteAll()
	})
}

// confirmDeletion deletes the pod with grace 0 (UID precondition), retrying
// while the API server is unreachable, for at most a minute.
func (a *Agent) confirmDeletion(r *podRun) {
	zero := int64(0)
	uid := r.uid
	deadline := time.Now().Add(time.Minute)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.cs.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid},
		})
		cancel()
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			a.log.Info("pod deleted", "pod", r.key)
			return
		}
		if time.Now().After(deadline) {
			a.log.Warn("confirm pod deletion: giving up", "pod", r.key, "err", err)
			return
		}
		a.log.Debug("confirm pod deletion", "pod", r.key, "err", err)
		time.Sleep(wait)
	}
}

// statusWriter writes r's status whenever it changes, retrying failed
// writes (API server restarts) with back-off until they land or ctx ends.
func (a *Agent) statusWriter(ctx context.Context, r *podRun) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.dirty:
		}
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
			err := a.writeStatus(ctx, r)
			if err == nil || apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				return
			}
			a.log.Debug("write pod status; retrying", "pod", r.key, "err", err, "in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// writeStatus writes r's current status if it differs from the API's.
func (a *Agent) writeStatus(ctx context.Context, r *podRun) error {
	for attempt := 0; ; attempt++ {
		pod := a.currentPod(r)
		if pod == nil || attempt > 0 {
			got, err := a.cs.CoreV1().Pods(r.ns).Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod = got
		}
		if pod.UID != r.uid {
			return apierrors.NewNotFound(corev1.Resource("pods"), r.name)
		}
		r.mu.Lock()
		view := r.view
		r.mu.Unlock()
		st := podStatus(pod.Status, view, time.Now())
		if statusEqual(st, pod.Status) {
			return nil
		}
		upd := pod.DeepCopy()
		upd.Status = st
		out, err := a.cs.CoreV1().Pods(r.ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("update status of pod %s: %w", r.key, err)
		}
		r.mu.Lock()
		r.lastPod = out
		r.mu.Unlock()
		return nil
	}
}

// currentPod is the newer of the informer's copy and the agent's last
// write (nil if neither).
func (a *Agent) currentPod(r *podRun) *corev1.Pod {
	r.mu.Lock()
	last := r.lastPod
	r.mu.Unlock()
	cached, err := a.podLister.Pods(r.ns).Get(r.name)
	if err != nil || cached.UID != r.uid {
		cached = nil
	}
	switch {
	case cached == nil:
		return last
	case last == nil:
		return cached
	}
	cv, err1 := strconv.ParseUint(cached.ResourceVersion, 10, 64)
	lv, err2 := strconv.ParseUint(last.ResourceVersion, 10, 64)
	if err1 == nil && err2 == nil && lv > cv {
		return last
	}
	return cached
}

// replicaEvent turns the runtime's events into core/v1 Events like the
// kubelet's. Called with the replica's lock held: it must not block (the
// recorder queues).
func (a *Agent) replicaEvent(r *podRun, container string, e event.Event) {
	switch e.Kind {
	case event.PodStarted:
		a.podEvent(r, container, corev1.EventTypeNormal, "Started", "Started container "+container)
	case event.ProbeResult:
		if !e.OK {
			a.podEvent(r, container, corev1.EventTypeWarning, "Unhealthy",
				fmt.Sprintf("%s probe failed: %s", capitalize(e.Probe), e.Detail))
		}
	case event.K8sEvent:
		typ := corev1.EventTypeNormal
		if e.Reason == "BackOff" {
			typ = corev1.EventTypeWarning
		}
		a.podEvent(r, container, typ, e.Reason, e.Detail)
	}
}

func (a *Agent) podEvent(r *podRun, container, typ, reason, msg string) {
	if a.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: r.ns, Name: r.name, UID: r.uid}
	if container != "" {
		ref.FieldPath = "spec.containers{" + container + "}"
	}
	a.recorder.Event(ref, typ, reason, msg)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
