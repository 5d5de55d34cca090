package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The test's own names for what it sees, deliberately the same strings as
// drill's event kinds so the two logs compare directly.
const (
	kPodReady     = "pod-ready"
	kPodUnready   = "pod-unready"
	kRestart      = "container-restart"
	kPodCreated   = "pod-created"
	kPodDeleted   = "pod-deleted"
	kEPReady      = "endpoint-ready"
	kEPNotReady   = "endpoint-not-ready"
	kEPRemoved    = "endpoint-removed"
	managedByCtrl = "endpointslice-controller.k8s.io"
)

// observation is one change the independent watch saw, stamped when its
// handler received it (wall clock with Go's monotonic reading).
type observation struct {
	at      time.Time
	kind    string
	pod     string
	restart int32  // kRestart: the restartCount reached
	manager string // endpoint kinds: the slice's managed-by label
	slice   string
}

// sliceWatch is the test's independent watch on a Service's pods and
// EndpointSlices, with its own diffing: a pod's Ready condition, its
// containers' restartCounts, and each endpoint's ready condition
// (aggregated over the Service's slices, nil ready meaning true). It uses
// client-go informers, which re-list after a broken watch, as any
// controller does.
type sliceWatch struct {
	mu        sync.Mutex
	obs       []observation
	podReady  map[string]bool
	podUID    map[string]string
	restarts  map[string]int32
	slices    map[string]map[string]bool // slice -> pod -> ready
	managers  map[string]string          // slice -> managed-by
	endpoints map[string]bool            // pod -> ready, aggregated
	stop      context.CancelFunc
	done      chan struct{}
}

// startWatch watches pods matching selector and the EndpointSlices of
// service in ns until the returned watch's close (also registered with
// t.Cleanup, so no watch outlives the test: the control plane stops faster
// without open watches).
func startWatch(t *testing.T, cs kubernetes.Interface, ns, selector, service string) *sliceWatch {
	t.Helper()
	w := &sliceWatch{
		podReady: map[string]bool{}, podUID: map[string]string{}, restarts: map[string]int32{},
		slices: map[string]map[string]bool{}, managers: map[string]string{}, endpoints: map[string]bool{},
		done: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	pf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	sf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	pi := pf.Core().V1().Pods().Informer()
	si := sf.Discovery().V1().EndpointSlices().Informer()
	_, err1 := pi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onPod(time.Now(), obj) },
		UpdateFunc: func(_, obj any) { w.onPod(time.Now(), obj) },
		DeleteFunc: func(obj any) { w.onPodDelete(time.Now(), obj) },
	})
	_, err2 := si.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onSlice(time.Now(), obj, false) },
		UpdateFunc: func(_, obj any) { w.onSlice(time.Now(), obj, false) },
		DeleteFunc: func(obj any) { w.onSlice(time.Now(), obj, true) },
	})
	if err1 != nil || err2 != nil {
		t.Fatalf("register watch handlers: %v %v", err1, err2)
	}
	pf.Start(ctx.Done())
	sf.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		pf.Shutdown()
		sf.Shutdown()
		close(w.done)
	}()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), pi.HasSynced, si.HasSynced) {
		w.close()
		t.Fatal("independent watch did not sync within a minute")
	}
	t.Cleanup(w.close)
	return w
}

func (w *sliceWatch) close() {
	w.stop()
	<-w.done
}

func (w *sliceWatch) add(o observation) { w.obs = append(w.obs, o) }

func (w *sliceWatch) onPod(at time.Time, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	uid, known := w.podUID[p.Name]
	if known && uid != string(p.UID) {
		w.add(observation{at: at, kind: kPodDeleted, pod: p.Name})
		known = false
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !known {
		w.podUID[p.Name] = string(p.UID)
		w.add(observation{at: at, kind: kPodCreated, pod: p.Name})
		if ready {
			w.add(observation{at: at, kind: kPodReady, pod: p.Name})
		}
		w.podReady[p.Name] = ready
		for _, cs := range p.Status.ContainerStatuses {
			w.restarts[p.Name+"/"+cs.Name] = cs.RestartCount
		}
		return
	}
	if ready != w.podReady[p.Name] {
		k := kPodUnready
		if ready {
			k = kPodReady
		}
		w.add(observation{at: at, kind: k, pod: p.Name})
		w.podReady[p.Name] = ready
	}
	for _, cs := range p.Status.ContainerStatuses {
		key := p.Name + "/" + cs.Name
		for n := w.restarts[key] + 1; n <= cs.RestartCount; n++ {
			w.add(observation{at: at, kind: kRestart, pod: p.Name, restart: n})
		}
		if cs.RestartCount > w.restarts[key] {
			w.restarts[key] = cs.RestartCount
		}
	}
}

func (w *sliceWatch) onPodDelete(at time.Time, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, known := w.podUID[p.Name]; known {
		delete(w.podUID, p.Name)
		delete(w.podReady, p.Name)
		w.add(observation{at: at, kind: kPodDeleted, pod: p.Name})
	}
}

func (w *sliceWatch) onSlice(at time.Time, obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.slices, s.Name)
	} else {
		eps := map[string]bool{}
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Name == "" {
				continue
			}
			eps[ep.TargetRef.Name] = eps[ep.TargetRef.Name] || ep.Conditions.Ready == nil || *ep.Conditions.Ready
		}
		w.slices[s.Name] = eps
		w.managers[s.Name] = s.Labels[discoveryv1.LabelManagedBy]
	}
	agg := map[string]bool{}
	for _, eps := range w.slices {
		for pod, ready := range eps {
			agg[pod] = agg[pod] || ready
		}
	}
	pods := map[string]bool{}
	for p := range agg {
		pods[p] = true
	}
	for p := range w.endpoints {
		pods[p] = true
	}
	names := make([]string, 0, len(pods))
	for p := range pods {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		cur, present := agg[p]
		old, had := w.endpoints[p]
		o := observation{at: at, pod: p, manager: w.managers[s.Name], slice: s.Name}
		switch {
		case !present:
			o.kind = kEPRemoved
		case !had || old != cur:
			o.kind = kEPNotReady
			if cur {
				o.kind = kEPReady
			}
		default:
			continue
		}
		w.add(o)
	}
	w.endpoints = agg
}

// observations returns a copy of what the watch saw, in order.
func (w *sliceWatch) observations() []observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]observation(nil), w.obs...)
}

// waitReady waits until n pods are ready and their n endpoints ready.
func (w *sliceWatch) waitReady(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		w.mu.Lock()
		pods, eps := 0, 0
		for _, r := range w.podReady {
			if r {
				pods++
			}
		}
		for _, r := range w.endpoints {
			if r {
				eps++
			}
		}
		w.mu.Unlock()
		if pods == n && eps == n {
			t.Logf("%d pods Ready and their endpoints ready %.1f s after the wait began", n, time.Since(start).Seconds())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d pods ready, %d endpoints ready", timeout, pods, n, eps)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removal is one unready transition of a pod and how long its endpoint
// took to leave (be seen not ready or gone), measured on one log.
type removal struct {
	pod     string
	unready time.Time
	latency time.Duration
	ok      bool
	manager string // managed-by of the slice that took it out (independent watch)
}

func (r removal) String() string {
	if !r.ok {
		return fmt.Sprintf("%s: never left the slice", r.pod)
	}
	return fmt.Sprintf("%s: %s", r.pod, r.latency.Round(10*time.Microsecond))
}

// removals applies the rule of docs/DESIGN.md §9 (and drill's
// endpoint-removal assertion) to a log: for each unready transition, the
// time to the pod's next endpoint-not-ready or endpoint-removed (0 if the
// endpoint was already out since the pod's last ready), unless the pod is
// ready again first.
func removals(obs []observation) []removal {
	var out []removal
	for i, u := range obs {
		if u.kind != kPodUnready {
			continue
		}
		m := removal{pod: u.pod, unready: u.at}
		var lastReady time.Time
		var lastEP *observation
		for j := 0; j < i; j++ {
			o := &obs[j]
			if o.pod != u.pod {
				continue
			}
			if o.kind == kPodReady {
				lastReady = o.at
			}
			if o.kind == kEPReady || o.kind == kEPNotReady || o.kind == kEPRemoved {
				lastEP = o
			}
		}
		if lastEP != nil && lastEP.kind != kEPReady && !lastEP.at.Before(lastReady) {
			m.ok, m.manager = true, lastEP.manager
			out = append(out, m)
			continue
		}
	next:
		for _, o := range obs[i+1:] {
			if o.pod != u.pod {
				continue
			}
			switch o.kind {
			case kEPNotReady, kEPRemoved:
				m.ok, m.latency, m.manager = true, o.at.Sub(u.at), o.manager
				break next
			case kPodReady:
				break next
			}
		}
		out = append(out, m)
	}
	return out
}
