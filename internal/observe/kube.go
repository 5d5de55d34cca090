package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/drillhq/drill/internal/event"
)

// SourceKube is the Event.Source of everything the Kubernetes observer sees.
const SourceKube = "kubernetes"

// Detail markers of first-sight events.
const (
	// DetailInitial marks state found in the informer's initial list (it
	// existed before the observer started; not a change).
	DetailInitial = "initial list"
)

// probeMemory is how long a pod's probe-failure Events are kept to explain
// a later restart; probeFallback is how old an "Unhealthy" Event may be to
// name the probe of a restart no "Killing" Event explains.
const (
	probeMemory   = 5 * time.Minute
	probeFallback = time.Minute
)

// KubeTarget is one watched set of a kubernetes run.
type KubeTarget struct {
	// Service is the drill-side name stamped on every event (Event.Service):
	// the scenario's service or observer name.
	Service string
	// Namespace is where the pods and EndpointSlices live; required.
	Namespace string
	// Selector is a label selector of the pods (e.g. "app=order-gateway");
	// empty: no pod watch (and no Events watch) for this target.
	Selector string
	// EndpointSliceService is the Kubernetes Service whose EndpointSlices
	// (label kubernetes.io/service-name) are watched; empty: none.
	EndpointSliceService string
}

// KubeOption configures a [Kube].
type KubeOption func(*Kube)

// WithTimeSource replaces the clock reading used to stamp events (default
// clock.Now). Tests use it to make scripted timelines exact.
func WithTimeSource(now func() time.Duration) KubeOption {
	return func(k *Kube) { k.now = now }
}

// WithResync sets the informers' resync period (default 0: none). A resync
// re-delivers every cached object; the observer emits nothing for it.
func WithResync(d time.Duration) KubeOption {
	return func(k *Kube) { k.resync = d }
}

// Kube watches pods, EndpointSlices and pod Events through client-go
// informers and turns changes into events on the run's clock
// (docs/DESIGN.md §4, §8). Every event's At is the moment the observer's
// own handler received the change (never a lastTransitionTime, which has
// one-second resolution).
//
// It derives transitions by diffing its own last-known state per pod,
// container and endpoint, so an informer resync or a re-list after a watch
// restart, which deliver the same objects again, produce no events, while
// changes made during a watch gap are reported when the re-list brings
// them (a restartCount that rose by n gives n restart events).
//
// Per pod of a target's Selector:
//   - [event.PodCreated] when first seen (Detail [DetailInitial] for pods
//     already there at start);
//   - [event.PodReady] / [event.PodUnready] when the Ready condition turns
//     True / False (a pod first seen ready gives PodReady; a pod first seen
//     unready gives nothing: pods start unready);
//   - [event.ContainerRestart] per increment of a container's restartCount
//     (Container, RestartCount, Reason = lastState.terminated.reason, Probe
//     = liveness or startup when a recent Event of the pod says that probe
//     failed, Detail = exit code and that Event's message); At is when the
//     kubelet's "Killing" Event that explains it was seen, else, for a
//     count that rose by one, when the observer first saw the container
//     ended (terminated, or waiting with a last termination, e.g. in
//     CrashLoopBackOff), else when the count rose;
//   - [event.PodDeleted] on deletion (Reason "deleted", or "deleted while
//     the watch was down" for a tombstone, or "replaced" when a pod of the
//     same name comes back with a new UID, or "left selector");
//   - [event.K8sEvent] per new occurrence of a core/v1 Event about the pod
//     (Reason, Detail = message, Container from fieldPath, Probe when the
//     message names one).
//
// Per endpoint of the target's Service (mapped to a pod by targetRef,
// aggregated across all slices of the Service):
//   - [event.EndpointReady] / [event.EndpointNotReady] when it appears or its
//     conditions.ready changes (nil ready counts as true; Detail
//     "serving=<bool> terminating=<bool>");
//   - [event.EndpointRemoved] when it is gone from every slice.
type Kube struct {
	cs      kubernetes.Interface
	now     func() time.Duration
	sink    event.Sink
	log     *slog.Logger
	resync  time.Duration
	targets []*kubeTarget
	bad     error // invalid target, reported by Run

	ready   chan struct{} // closed when synced or failed
	syncErr error

	mu sync.Mutex
	// unmatched holds pod Events that arrived before their pod, per
	// namespace and pod name.
	unmatched map[string]map[string][]pendingEvent
	seenEvent map[string]eventSeen // "ns/name" of a core/v1 Event
}

type kubeTarget struct {
	KubeTarget
	sel       labels.Selector
	pods      map[string]*podState
	known     map[string]bool                // every pod name ever seen
	slices    map[string]map[string]endpoint // slice name -> endpoint key -> state
	endpoints map[string]endpoint            // aggregated, as last reported
	recent    map[string][]probeFailure      // pod -> recent probe failure Events
}

type podState struct {
	uid      types.UID
	ready    bool
	restarts map[string]int32 // container name -> restartCount
	// ended: container name -> when the observer first saw it ended and
	// not yet started again (terminated, or waiting with a last
	// termination, e.g. in CrashLoopBackOff), at which restartCount.
	ended map[string]endedAt
}

type endedAt struct {
	at    time.Duration
	count int32
}

type endpoint struct {
	pod, address                string
	ready, serving, terminating bool
}

type probeFailure struct {
	at        time.Duration
	container string
	probe     string
	message   string
	kill      bool // a "Killing" Event: explains one restart
	used      bool // already named by a restart
}

// pendingEvent is a new occurrence of a core/v1 Event as received.
type pendingEvent struct {
	at          time.Duration
	ev          *corev1.Event
	occurrences int32 // new occurrences since last seen (count rise)
}

type eventSeen struct {
	count int32
	last  time.Time
}

// NewKube builds an observer of targets through cs. Events are stamped by
// clock.Now (see [WithTimeSource]) and sent to sink. log may be nil.
// Invalid selectors are reported by Run.
func NewKube(cs kubernetes.Interface, clock *event.Clock, sink event.Sink, targets []KubeTarget, log *slog.Logger, opts ...KubeOption) *Kube {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Kube{
		cs: cs, sink: sink, log: log,
		ready:     make(chan struct{}),
		unmatched: map[string]map[string][]pendingEvent{},
		seenEvent: map[string]eventSeen{},
	}
	if clock != nil {
		k.now = clock.Now
	}
	for _, o := range opts {
		o(k)
	}
	var errs []error
	for i, t := range targets {
		kt := &kubeTarget{
			KubeTarget: t,
			pods:       map[string]*podState{},
			known:      map[string]bool{},
			slices:     map[string]map[string]endpoint{},
			endpoints:  map[string]endpoint{},
			recent:     map[string][]probeFailure{},
			sel:        labels.Nothing(),
		}
		if t.Namespace == "" {
			errs = append(errs, fmt.Errorf("kubernetes target %d (%s): namespace is empty", i, t.Service))
		}
		if t.Selector != "" {
			sel, err := labels.Parse(t.Selector)
			if err != nil {
				errs = append(errs, fmt.Errorf("parse pod selector %q of %s: %w", t.Selector, t.Service, err))
			} else {
				kt.sel = sel
			}
		}
		k.targets = append(k.targets, kt)
	}
	if k.now == nil {
		errs = append(errs, errors.New("kubernetes observer: no clock"))
	}
	k.bad = errors.Join(errs...)
	return k
}

// WaitSynced blocks until every informer has listed and its handlers have
// received the initial objects (nil), Run failed to sync (its error), or
// ctx ends (ctx's error).
func (k *Kube) WaitSynced(ctx context.Context) error {
	select {
	case <-k.ready:
		return k.syncErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run starts the informers and blocks until ctx is done, then shuts them
// down and returns nil. It returns early with an error if a target is
// invalid or ctx ends before the caches have synced.
func (k *Kube) Run(ctx context.Context) error {
	if k.bad != nil {
		k.syncErr = k.bad
		close(k.ready)
		return k.bad
	}
	var factories []informers.SharedInformerFactory
	var synced []cache.InformerSynced
	register := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
		return nil
	}
	eventNamespaces := map[string]bool{}
	var errs []error
	for _, t := range k.targets {
		if t.Selector != "" {
			sel := t.Selector
			f := informers.NewSharedInformerFactoryWithOptions(k.cs, k.resync, informers.WithNamespace(t.Namespace),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
			factories = append(factories, f)
			errs = append(errs, register(f.Core().V1().Pods().Informer(), k.podHandler(t)))
			eventNamespaces[t.Namespace] = true
		}
		if t.EndpointSliceService != "" {
			svcSel := discoveryv1.LabelServiceName + "=" + t.EndpointSliceService
			f := informers.NewSharedInformerFactoryWithOptions(k.cs, k.resync, informers.WithNamespace(t.Namespace),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = svcSel }))
			factories = append(factories, f)
			errs = append(errs, register(f.Discovery().V1().EndpointSlices().Informer(), k.sliceHandler(t)))
		}
	}
	nss := make([]string, 0, len(eventNamespaces))
	for ns := range eventNamespaces {
		nss = append(nss, ns)
	}
	slices.Sort(nss)
	for _, ns := range nss {
		f := informers.NewSharedInformerFactoryWithOptions(k.cs, k.resync, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "involvedObject.kind=Pod" }))
		factories = append(factories, f)
		errs = append(errs, register(f.Core().V1().Events().Informer(), k.eventHandler(ns)))
	}
	if err := errors.Join(errs...); err != nil {
		k.syncErr = fmt.Errorf("register informer handlers: %w", err)
		close(k.ready)
		return k.syncErr
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	// Shutdown blocks until the informers stop, which needs ctx done first.
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		k.syncErr = errors.New("sync kubernetes informers: stopped before the caches synced")
		if err := context.Cause(ctx); err != nil {
			k.syncErr = fmt.Errorf("sync kubernetes informers: %w", err)
		}
		close(k.ready)
		return k.syncErr
	}
	k.log.Debug("kubernetes observer synced", "targets", len(k.targets))
	close(k.ready)
	<-ctx.Done()
	return nil
}

func (k *Kube) emit(e event.Event) {
	e.Source = SourceKube
	k.sink.Emit(e)
}

// ---- pods ----

func (k *Kube) podHandler(t *kubeTarget) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if p, ok := obj.(*corev1.Pod); ok {
				k.onPod(t, p, initial, k.now())
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				k.onPod(t, p, false, k.now())
			}
		},
		DeleteFunc: func(obj any) {
			at := k.now()
			reason := "deleted"
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj, reason = tomb.Obj, "deleted while the watch was down"
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.mu.Lock()
				k.podGone(t, p.Name, reason, at)
				k.mu.Unlock()
			}
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (k *Kube) onPod(t *kubeTarget, p *corev1.Pod, initial bool, at time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := t.pods[p.Name]
	if !t.sel.Matches(labels.Set(p.Labels)) { // the fake ignores selectors on watches
		if st != nil {
			k.podGone(t, p.Name, "left selector", at)
		}
		return
	}
	if st != nil && st.uid != p.UID {
		k.podGone(t, p.Name, "replaced", at)
		st = nil
	}
	base := event.Event{At: at, Service: t.Service, Pod: p.Name, Address: p.Status.PodIP}
	ready := podReady(p)
	if st == nil {
		st = &podState{uid: p.UID, restarts: map[string]int32{}, ended: map[string]endedAt{}}
		t.pods[p.Name] = st
		t.known[p.Name] = true
		e := base
		e.Kind = event.PodCreated
		if initial {
			e.Detail = DetailInitial
		}
		k.emit(e)
		if initial {
			// Restarts before the observer started are not changes.
			for _, cs := range containerStatuses(p) {
				st.restarts[cs.Name] = cs.RestartCount
			}
		}
		if ready {
			e := base
			e.Kind, e.Detail = event.PodReady, ""
			if initial {
				e.Detail = DetailInitial
			}
			k.emit(e)
		}
		st.ready = ready
		k.flushPending(t, p.Namespace, p.Name)
	} else if ready != st.ready {
		e := base
		e.Kind = event.PodUnready
		if ready {
			e.Kind = event.PodReady
		}
		k.emit(e)
		st.ready = ready
	}
	for _, cs := range containerStatuses(p) {
		prev, seen := st.restarts[cs.Name]
		if !seen {
			prev = 0
		}
		for n := prev + 1; n <= cs.RestartCount; n++ {
			e := k.restartEvent(t, base, cs, n, cs.RestartCount-prev)
			// A crash is dated by its exit, as first seen, not by the new
			// container after the back-off (a kill by its Killing Event,
			// earlier still).
			if x, ok := st.ended[cs.Name]; ok && cs.RestartCount == prev+1 && x.count == prev && x.at < e.At {
				e.At = x.at
			}
			k.emit(e)
		}
		st.restarts[cs.Name] = cs.RestartCount
		ended := cs.State.Terminated != nil || (cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil)
		if x, ok := st.ended[cs.Name]; !ended {
			delete(st.ended, cs.Name)
		} else if !ok || x.count != cs.RestartCount {
			st.ended[cs.Name] = endedAt{at: at, count: cs.RestartCount}
		}
	}
}

func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses))
	out = append(out, p.Status.InitContainerStatuses...)
	return append(out, p.Status.ContainerStatuses...)
}

func (k *Kube) restartEvent(t *kubeTarget, base event.Event, cs corev1.ContainerStatus, n, rose int32) event.Event {
	e := base
	e.Kind = event.ContainerRestart
	e.Container = cs.Name
	e.RestartCount = n
	var details []string
	if term := cs.LastTerminationState.Terminated; term != nil {
		e.Reason = term.Reason
		details = append(details, fmt.Sprintf("exit code %d", term.ExitCode))
		if term.Signal != 0 {
			details = append(details, fmt.Sprintf("signal %d", term.Signal))
		}
	}
	if pf, ok := t.probeCause(base.Pod, cs.Name, base.At); ok {
		e.Probe = pf.probe
		details = append(details, pf.message)
		if pf.kill && pf.at < e.At {
			// A kill is dated by the kubelet's decision (its Killing
			// Event), not by the new container, which comes only once the
			// old one has shut down.
			e.At = pf.at
		}
	}
	if rose > 1 {
		details = append(details, fmt.Sprintf("restartCount rose by %d at once", rose))
	}
	e.Detail = strings.Join(details, "; ")
	return e
}

// probeCause explains a restart of container in pod at at. A kubelet
// "Killing" Event saying the liveness (or startup) probe failed explains
// exactly one restart and is used up; failing that, a probe failure
// ("Unhealthy") of the last probeFallback is named. Caller holds k.mu.
func (t *kubeTarget) probeCause(pod, container string, at time.Duration) (probeFailure, bool) {
	rs := t.recent[pod]
	fits := func(pf probeFailure) bool {
		return (pf.probe == event.ProbeLiveness || pf.probe == event.ProbeStartup) &&
			(pf.container == "" || pf.container == container) && at-pf.at <= probeMemory
	}
	for i, pf := range rs {
		if pf.kill && !pf.used && fits(pf) {
			rs[i].used = true
			return pf, true
		}
	}
	for i := len(rs) - 1; i >= 0; i-- {
		if pf := rs[i]; !pf.kill && fits(pf) && at-pf.at <= probeFallback {
			return pf, true
		}
	}
	return probeFailure{}, false
}

// podGone forgets pod name of t and emits PodDeleted. Caller holds k.mu.
func (k *Kube) podGone(t *kubeTarget, name, reason string, at time.Duration) {
	if _, ok := t.pods[name]; !ok {
		return
	}
	delete(t.pods, name)
	k.emit(event.Event{At: at, Kind: event.PodDeleted, Service: t.Service, Pod: name, Reason: reason})
}

// ---- EndpointSlices ----

func (k *Kube) sliceHandler(t *kubeTarget) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				k.onSlice(t, s, initial, k.now())
			}
		},
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				k.onSlice(t, s, false, k.now())
			}
		},
		DeleteFunc: func(obj any) {
			at := k.now()
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				k.mu.Lock()
				defer k.mu.Unlock()
				if _, had := t.slices[s.Name]; had {
					delete(t.slices, s.Name)
					k.diffEndpoints(t, false, at)
				}
			}
		},
	}
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func endpointKey(ep discoveryv1.Endpoint) (key, pod string) {
	if r := ep.TargetRef; r != nil && (r.Kind == "Pod" || r.Kind == "") && r.Name != "" {
		return "pod/" + r.Name, r.Name
	}
	if len(ep.Addresses) > 0 {
		return "addr/" + ep.Addresses[0], ""
	}
	return "", ""
}

func (k *Kube) onSlice(t *kubeTarget, s *discoveryv1.EndpointSlice, initial bool, at time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s.Labels[discoveryv1.LabelServiceName] != t.EndpointSliceService { // the fake ignores selectors on watches
		if _, had := t.slices[s.Name]; had {
			delete(t.slices, s.Name)
			k.diffEndpoints(t, initial, at)
		}
		return
	}
	eps := make(map[string]endpoint, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		key, pod := endpointKey(ep)
		if key == "" {
			continue
		}
		e := endpoint{
			pod:         pod,
			ready:       boolOr(ep.Conditions.Ready, true),
			serving:     boolOr(ep.Conditions.Serving, true),
			terminating: boolOr(ep.Conditions.Terminating, false),
		}
		if len(ep.Addresses) > 0 {
			e.address = ep.Addresses[0]
		}
		if old, dup := eps[key]; dup && old.ready && !e.ready {
			continue
		}
		eps[key] = e
	}
	t.slices[s.Name] = eps
	k.diffEndpoints(t, initial, at)
}

// diffEndpoints aggregates t's slices (an endpoint ready in any slice is
// ready) and reports what changed since the last report. Caller holds k.mu.
func (k *Kube) diffEndpoints(t *kubeTarget, initial bool, at time.Duration) {
	agg := map[string]endpoint{}
	names := make([]string, 0, len(t.slices))
	for n := range t.slices {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for key, e := range t.slices[n] {
			if old, ok := agg[key]; ok && (old.ready || !e.ready) {
				continue
			}
			agg[key] = e
		}
	}
	keys := make([]string, 0, len(agg)+len(t.endpoints))
	for key := range agg {
		keys = append(keys, key)
	}
	for key := range t.endpoints {
		if _, ok := agg[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		cur, present := agg[key]
		old, had := t.endpoints[key]
		switch {
		case !present:
			k.emit(event.Event{At: at, Kind: event.EndpointRemoved, Service: t.Service, Pod: old.pod, Address: old.address})
		case !had || old.ready != cur.ready:
			e := event.Event{At: at, Kind: event.EndpointNotReady, Service: t.Service, Pod: cur.pod, Address: cur.address,
				Detail: fmt.Sprintf("serving=%t terminating=%t", cur.serving, cur.terminating)}
			if cur.ready {
				e.Kind = event.EndpointReady
			}
			if !had && initial {
				e.Detail += " (" + DetailInitial + ")"
			}
			k.emit(e)
		}
	}
	t.endpoints = agg
}

// ---- core/v1 Events ----

func (k *Kube) eventHandler(ns string) cache.ResourceEventHandler {
	on := func(obj any) {
		if ev, ok := obj.(*corev1.Event); ok {
			k.onEvent(ns, ev, k.now())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj any) { on(obj) },
	}
}

func eventCount(ev *corev1.Event) int32 {
	n := ev.Count
	if ev.Series != nil && ev.Series.Count > n {
		n = ev.Series.Count
	}
	if n < 1 {
		n = 1
	}
	return n
}

func eventLast(ev *corev1.Event) time.Time {
	last := ev.LastTimestamp.Time
	if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
		last = ev.Series.LastObservedTime.Time
	}
	if ev.EventTime.After(last) {
		last = ev.EventTime.Time
	}
	return last
}

func (k *Kube) onEvent(ns string, ev *corev1.Event, at time.Duration) {
	if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key := ev.Namespace + "/" + ev.Name
	cnt, last := eventCount(ev), eventLast(ev)
	seen, ok := k.seenEvent[key]
	if ok && cnt <= seen.count && !last.After(seen.last) {
		return // resync or re-list: nothing new
	}
	k.seenEvent[key] = eventSeen{count: cnt, last: last}
	occurrences := int32(1)
	if ok && cnt > seen.count {
		occurrences = cnt - seen.count
	}
	pe := pendingEvent{at: at, ev: ev, occurrences: occurrences}
	pod := ev.InvolvedObject.Name
	matched := false
	for _, t := range k.targets {
		if t.Namespace == ns && t.known[pod] {
			k.podEvent(t, pe)
			matched = true
		}
	}
	if !matched {
		m := k.unmatched[ns]
		if m == nil {
			m = map[string][]pendingEvent{}
			k.unmatched[ns] = m
		}
		if len(m) < 1000 && len(m[pod]) < 50 {
			m[pod] = append(m[pod], pe)
		}
	}
}

// flushPending reports Events of pod that arrived before the pod. Caller holds k.mu.
func (k *Kube) flushPending(t *kubeTarget, ns, pod string) {
	m := k.unmatched[ns]
	if m == nil || t.Namespace != ns {
		return
	}
	for _, pe := range m[pod] {
		k.podEvent(t, pe)
	}
	delete(m, pod)
}

// probeOf names the probe an Event message is about ("" if none).
func probeOf(msg string) string {
	l := strings.ToLower(msg)
	for _, p := range []string{event.ProbeLiveness, event.ProbeStartup, event.ProbeReadiness} {
		if strings.Contains(l, p+" probe") {
			return p
		}
	}
	return ""
}

// containerOf extracts the container name from a fieldPath like
// "spec.containers{app}".
func containerOf(fieldPath string) string {
	i := strings.IndexByte(fieldPath, '{')
	j := strings.LastIndexByte(fieldPath, '}')
	if i < 0 || j < i {
		return ""
	}
	return fieldPath[i+1 : j]
}

// podEvent emits pe for t and remembers probe failures. Caller holds k.mu.
func (k *Kube) podEvent(t *kubeTarget, pe pendingEvent) {
	ev, at := pe.ev, pe.at
	pod := ev.InvolvedObject.Name
	e := event.Event{
		At: at, Kind: event.K8sEvent, Service: t.Service, Pod: pod,
		Container: containerOf(ev.InvolvedObject.FieldPath),
		Reason:    ev.Reason, Detail: ev.Message,
		Probe: probeOf(ev.Message),
	}
	if n := eventCount(ev); n > 1 {
		e.Detail = fmt.Sprintf("%s (x%d)", ev.Message, n)
	}
	k.emit(e)
	if e.Probe == "" || (ev.Type != corev1.EventTypeWarning && ev.Reason != "Killing") {
		return
	}
	rs := t.recent[pod]
	n := int32(1)
	if ev.Reason == "Killing" {
		n = min(pe.occurrences, 100)
	}
	for range n {
		rs = append(rs, probeFailure{at: at, container: e.Container, probe: e.Probe,
			message: ev.Reason + ": " + ev.Message, kill: ev.Reason == "Killing"})
	}
	for len(rs) > 0 && at-rs[0].at > probeMemory {
		rs = rs[1:]
	}
	if len(rs) > 100 {
		rs = rs[len(rs)-100:]
	}
	t.recent[pod] = rs
}
