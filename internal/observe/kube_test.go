package observe

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite golden files")

const ns = "drill"

// fakeTime is the observer's time source in tests: the test sets the
// offset before each scripted write, so stamped times are exact.
type fakeTime struct{ d atomic.Int64 }

func (f *fakeTime) now() time.Duration { return time.Duration(f.d.Load()) }
func (f *fakeTime) set(s string) {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	f.d.Store(int64(d))
}

func ptr[T any](v T) *T { return &v }

func newPod(name, app string, ready bool, restarts int32) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}},
		Status: corev1.PodStatus{
			PodIP:      podIP(name),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", RestartCount: restarts, Ready: ready,
			}},
		},
	}
}

func podIP(name string) string { return "192.0.2." + fmt.Sprint(int(name[len(name)-1])%50+1) }

type epSpec struct {
	pod              string
	ready, terminate *bool
	serving          *bool
}

func newSlice(name, svc string, eps ...epSpec) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{podIP(e.pod)},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminate},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod},
		})
	}
	return s
}

func podEvent(name, pod, typ, reason, msg string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, FieldPath: "spec.containers{app}"},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
	}
}

// ctlWatch forwards a tracker watch and can end it with a 410 Expired
// error, as an API server does when a watch's resource version is too old.
type ctlWatch struct {
	inner   watch.Interface
	out     chan watch.Event
	expire  chan struct{}
	stop    chan struct{}
	expOnce sync.Once
	stpOnce sync.Once
}

func newCtlWatch(inner watch.Interface) *ctlWatch {
	w := &ctlWatch{inner: inner, out: make(chan watch.Event), expire: make(chan struct{}), stop: make(chan struct{})}
	go w.run()
	return w
}

func (w *ctlWatch) run() {
	defer close(w.out)
	defer w.inner.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.expire:
			gone := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
			select {
			case w.out <- watch.Event{Type: watch.Error, Object: gone}:
			case <-w.stop:
			}
			return
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			case <-w.expire:
				// dropped: the API server lost it; the re-list must recover it
				w.expire = nil
				gone := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
				select {
				case w.out <- watch.Event{Type: watch.Error, Object: gone}:
				case <-w.stop:
				}
				return
			}
		}
	}
}

func (w *ctlWatch) Stop()                          { w.stpOnce.Do(func() { close(w.stop) }) }
func (w *ctlWatch) ResultChan() <-chan watch.Event { return w.out }
func (w *ctlWatch) Expire()                        { w.expOnce.Do(func() { close(w.expire) }) }

// apiControl makes the fake clientset behave like an API server that can
// expire every open watch and refuse lists and watches for a while.
type apiControl struct {
	mu      sync.Mutex
	watches []*ctlWatch
	down    atomic.Bool
	lists   atomic.Int32
}

func installAPIControl(cs *fake.Clientset) *apiControl {
	c := &apiControl{}
	cs.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if c.down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("api server down")
		}
		var opts metav1.ListOptions
		if wa, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		inner, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		w := newCtlWatch(inner)
		c.mu.Lock()
		c.watches = append(c.watches, w)
		c.mu.Unlock()
		return true, w, nil
	})
	cs.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		if c.down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("api server down")
		}
		c.lists.Add(1)
		return false, nil, nil
	})
	return c
}

// outage expires every open watch and refuses lists and watches until the
// returned function is called.
func (c *apiControl) outage() (restore func()) {
	c.down.Store(true)
	c.mu.Lock()
	ws := c.watches
	c.watches = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.Expire()
	}
	return func() { c.down.Store(false) }
}

func has(kind event.Kind, pod string, extra ...func(event.Event) bool) func(event.Event) bool {
	return func(e event.Event) bool {
		if e.Kind != kind || e.Pod != pod {
			return false
		}
		for _, f := range extra {
			if !f(e) {
				return false
			}
		}
		return true
	}
}

func restartN(n int32) func(event.Event) bool {
	return func(e event.Event) bool { return e.RestartCount == n }
}

// TestKubeScriptedTimeline reproduces a scripted drill on the fake
// clientset: a restart at t=12.3 s, a pod unready at t=20.000 s
// and out of its EndpointSlice at t=20.400 s (removal latency 400 ms), an
// endpoint removed from the slice, and a watch outage with changes during
// the gap that the re-list recovers, with nothing double counted or lost.
func TestKubeScriptedTimeline(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		newPod("gw-a", "order-gateway", true, 0),
		newPod("gw-b", "order-gateway", true, 0),
		newPod("gw-c", "order-gateway", true, 2), // restarted before the run: not counted
		newPod("other-1", "other", true, 0),
		newSlice("gw-x1", "order-gateway", epSpec{pod: "gw-a"}, epSpec{pod: "gw-b", ready: ptr(true)}),
		newSlice("gw-x2", "order-gateway", epSpec{pod: "gw-c"}),
		newSlice("other-x", "other", epSpec{pod: "other-1"}),
	)
	api := installAPIControl(cs)
	ft := &fakeTime{}
	ft.set("-2s")
	sink := newCollect()
	k := NewKube(cs, event.NewClock(), sink,
		[]KubeTarget{{Service: "order-gateway", Namespace: ns, Selector: "app=order-gateway", EndpointSliceService: "order-gateway"}},
		nil, WithTimeSource(ft.now), WithResync(time.Second))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := k.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "initial state", func(ev []event.Event) bool {
		return count(ev, func(e event.Event) bool { return e.Kind == event.EndpointReady }) == 3 &&
			count(ev, func(e event.Event) bool { return e.Kind == event.PodReady }) == 3
	})

	pods := cs.CoreV1().Pods(ns)
	slicesAPI := cs.DiscoveryV1().EndpointSlices(ns)
	events := cs.CoreV1().Events(ns)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	step := func(at string, what string, want func([]event.Event) bool, write func()) {
		t.Helper()
		ft.set(at)
		write()
		sink.waitFor(t, what, want)
	}
	one := func(f func(event.Event) bool) func([]event.Event) bool {
		return func(ev []event.Event) bool { return count(ev, f) >= 1 }
	}

	// t=11.0, 12.0: the kubelet reports the liveness failure and the kill.
	step("11s", "Unhealthy event", one(has(event.K8sEvent, "gw-b")), func() {
		must(events.Create(ctx, podEvent("gw-b.1", "gw-b", corev1.EventTypeWarning, "Unhealthy",
			"Liveness probe failed: HTTP probe failed with statuscode: 500"), metav1.CreateOptions{}))
	})
	step("12s", "Killing event", one(has(event.K8sEvent, "gw-b", func(e event.Event) bool { return e.Reason == "Killing" })), func() {
		must(events.Create(ctx, podEvent("gw-b.2", "gw-b", corev1.EventTypeNormal, "Killing",
			"Container app failed liveness probe, will be restarted"), metav1.CreateOptions{}))
	})
	// t=12.3: gw-b's container restarted.
	step("12.3s", "restart of gw-b", one(has(event.ContainerRestart, "gw-b")), func() {
		p := newPod("gw-b", "order-gateway", true, 1)
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}
		must(pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	})
	// A pod outside the selector changes: nothing must be reported.
	ft.set("15s")
	must(pods.UpdateStatus(ctx, newPod("other-1", "other", false, 5), metav1.UpdateOptions{}))
	must(slicesAPI.Update(ctx, newSlice("other-x", "other", epSpec{pod: "other-1", ready: ptr(false)}), metav1.UpdateOptions{}))
	// t=20.000: gw-a unready; t=20.400: its endpoint not ready.
	step("20s", "gw-a unready", one(has(event.PodUnready, "gw-a")), func() {
		must(pods.UpdateStatus(ctx, newPod("gw-a", "order-gateway", false, 0), metav1.UpdateOptions{}))
	})
	step("20.4s", "gw-a endpoint not ready", one(has(event.EndpointNotReady, "gw-a")), func() {
		must(slicesAPI.Update(ctx, newSlice("gw-x1", "order-gateway",
			epSpec{pod: "gw-a", ready: ptr(false), serving: ptr(false)}, epSpec{pod: "gw-b", ready: ptr(true)}), metav1.UpdateOptions{}))
	})
	// t=21.000: gw-c unready; t=21.250: its slice loses it (removed).
	step("21s", "gw-c unready", one(has(event.PodUnready, "gw-c")), func() {
		must(pods.UpdateStatus(ctx, newPod("gw-c", "order-gateway", false, 2), metav1.UpdateOptions{}))
	})
	step("21.25s", "gw-c endpoint removed", one(has(event.EndpointRemoved, "gw-c")), func() {
		must(slicesAPI.Update(ctx, newSlice("gw-x2", "order-gateway"), metav1.UpdateOptions{}))
	})

	// t=24: the kubelet kills gw-b twice more (the Event's count goes to 3);
	// the restarts themselves are seen only after the outage below.
	step("24s", "Killing x3", one(has(event.K8sEvent, "gw-b", func(e event.Event) bool { return strings.HasSuffix(e.Detail, "(x3)") })), func() {
		ev := podEvent("gw-b.2", "gw-b", corev1.EventTypeNormal, "Killing", "Container app failed liveness probe, will be restarted")
		ev.Count = 3
		must(events.Update(ctx, ev, metav1.UpdateOptions{}))
	})

	// t=25: the API server expires every watch and refuses lists until t=27.
	// Changes made during the outage must be reported once, by the re-list.
	ft.set("25s")
	listsBefore := api.lists.Load()
	restore := api.outage()
	ft.set("26s")
	must(pods.UpdateStatus(ctx, newPod("gw-a", "order-gateway", true, 0), metav1.UpdateOptions{}))
	if err := pods.Delete(ctx, "gw-c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	must(pods.Create(ctx, newPod("gw-d", "order-gateway", false, 0), metav1.CreateOptions{}))
	pb := newPod("gw-b", "order-gateway", true, 3)
	pb.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}
	must(pods.UpdateStatus(ctx, pb, metav1.UpdateOptions{}))
	must(slicesAPI.Update(ctx, newSlice("gw-x1", "order-gateway", epSpec{pod: "gw-a"}, epSpec{pod: "gw-b"}, epSpec{pod: "gw-d", ready: ptr(false)}), metav1.UpdateOptions{}))
	time.Sleep(300 * time.Millisecond) // the informers try (and fail) to re-list meanwhile
	step("27s", "re-list after the outage", func(ev []event.Event) bool {
		return count(ev, has(event.PodReady, "gw-a")) >= 2 && count(ev, has(event.PodDeleted, "gw-c")) >= 1 &&
			count(ev, has(event.PodCreated, "gw-d")) >= 1 && count(ev, has(event.ContainerRestart, "gw-b", restartN(3))) >= 1 &&
			count(ev, has(event.EndpointReady, "gw-a")) >= 2 && count(ev, has(event.EndpointNotReady, "gw-d")) >= 1
	}, restore)
	if api.lists.Load() <= listsBefore {
		t.Fatalf("no re-list after the outage")
	}
	// t=30: after the re-list the new watches deliver again.
	step("30s", "gw-d ready", one(has(event.PodReady, "gw-d")), func() {
		must(pods.UpdateStatus(ctx, newPod("gw-d", "order-gateway", true, 0), metav1.UpdateOptions{}))
	})
	// Resyncs (every 1 s, the informers' minimum) ran during the test: they must add nothing.
	ft.set("31s")
	time.Sleep(300 * time.Millisecond)

	got := sink.snapshot()
	for _, e := range got {
		if e.Source != SourceKube || e.Service != "order-gateway" {
			t.Errorf("event %s: source %q service %q", fmtEvent(e), e.Source, e.Service)
		}
		if e.Pod == "other-1" {
			t.Errorf("event of a pod outside the selector: %s", fmtEvent(e))
		}
	}
	checkGolden(t, "kube_timeline.golden", got)

	// The endpoint-removal figure (docs/DESIGN.md §9), from the observer's
	// own events.
	unready := atOf(t, got, has(event.PodUnready, "gw-a"))
	out := atOf(t, got, func(e event.Event) bool {
		return e.Pod == "gw-a" && (e.Kind == event.EndpointNotReady || e.Kind == event.EndpointRemoved) && e.At >= unready
	})
	if lat := out - unready; lat != 400*time.Millisecond {
		t.Errorf("removal latency of gw-a = %v, want 400ms", lat)
	}
	restart := got[indexOf(got, has(event.ContainerRestart, "gw-b", restartN(1)))]
	// Dated by the Killing Event (12 s), not by the count's rise (12.3 s).
	if restart.At != 12*time.Second || restart.Probe != event.ProbeLiveness || restart.Reason != "Error" || restart.Container != "app" {
		t.Errorf("restart event %s: want at 12s (the Killing Event), probe liveness, reason Error, container app", fmtEvent(restart))
	}
}

func atOf(t *testing.T, ev []event.Event, f func(event.Event) bool) time.Duration {
	t.Helper()
	i := indexOf(ev, f)
	if i < 0 {
		t.Fatalf("event not found in:\n%s", dump(ev))
	}
	return ev[i].At
}

func indexOf(ev []event.Event, f func(event.Event) bool) int {
	for i, e := range ev {
		if f(e) {
			return i
		}
	}
	return -1
}

// checkGolden compares events (ordered by time, then by their rendering, as
// informers of different resources deliver concurrently) with a golden file.
func checkGolden(t *testing.T, name string, ev []event.Event) {
	t.Helper()
	lines := make([]string, len(ev))
	sorted := append([]event.Event(nil), ev...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].At != sorted[j].At {
			return sorted[i].At < sorted[j].At
		}
		return fmtEvent(sorted[i]) < fmtEvent(sorted[j])
	})
	for i, e := range sorted {
		lines[i] = strings.TrimRight(fmtEvent(e), " ")
	}
	golden.Check(t, filepath.Join("testdata", name), []byte(strings.Join(lines, "\n")+"\n"), *update)
}
