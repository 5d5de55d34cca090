package nodeagent

import (
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/drillhq/drill/internal/localenv"
)

// route is one Kubernetes Service fronted by a local proxy.
type route struct {
	ns, name string
	proxy    *localenv.Proxy

	mu     sync.Mutex
	slices map[string][]endpointRef // EndpointSlice name -> its endpoints
	set    map[string]string        // pod -> loopback address given to the proxy
	// lagging: pods being deleted whose endpoint stays routed as before
	// until the time given (the endpoint lag after their deletion began).
	lagging map[string]time.Time
}

// endpointRef is one endpoint of a slice, as the proxy needs it.
type endpointRef struct {
	address string // the pod IP the slice names (192.0.2.x)
	pod     string // targetRef name ("" if none)
	ready   bool
	// terminating: the pod is being deleted; serving is its readiness
	// meanwhile (conditions.terminating and conditions.serving).
	terminating, serving bool
}

func (a *Agent) routeFor(s *discoveryv1.EndpointSlice) *route {
	svc := s.Labels[discoveryv1.LabelServiceName]
	for _, r := range a.routes {
		if r.ns == s.Namespace && r.name == svc {
			return r
		}
	}
	return nil
}

// sliceHandler follows the EndpointSlices of the routed Services.
func (a *Agent) sliceHandler() cache.ResourceEventHandler {
	upsert := func(obj any) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		r := a.routeFor(s)
		if r == nil {
			return
		}
		var eps []endpointRef
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			c := ep.Conditions
			e := endpointRef{address: ep.Addresses[0], ready: c.Ready == nil || *c.Ready,
				terminating: c.Terminating != nil && *c.Terminating}
			e.serving = e.ready || (c.Serving != nil && *c.Serving)
			if ep.TargetRef != nil && (ep.TargetRef.Kind == "Pod" || ep.TargetRef.Kind == "") {
				e.pod = ep.TargetRef.Name
			}
			eps = append(eps, e)
		}
		r.mu.Lock()
		r.slices[s.Name] = eps
		r.mu.Unlock()
		a.reroute(r)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return
			}
			if r := a.routeFor(s); r != nil {
				r.mu.Lock()
				delete(r.slices, s.Name)
				r.mu.Unlock()
				a.reroute(r)
			}
		},
	}
}

// rerouteAll recomputes every route (a pod started or stopped).
func (a *Agent) rerouteAll() {
	for _, r := range a.routes {
		a.reroute(r)
	}
}

// lagDeletion starts the endpoint lag of run, a pod whose deletion began:
// every route that routes it keeps routing it as before until the lag is
// over, then follows the EndpointSlices again (see [Agent.reroute]). A lag
// already under way for the pod is left as it is.
func (a *Agent) lagDeletion(run *podRun) {
	for _, r := range a.routes {
		if r.ns == run.ns {
			a.startLag(r, run.name)
		}
	}
}

// startLag starts pod's endpoint lag in r if r routes it and no lag is
// under way; it schedules the reroute that ends it. Callers must not hold
// r.mu.
func (a *Agent) startLag(r *route, pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.startLagLocked(r, pod)
}

func (a *Agent) startLagLocked(r *route, pod string) {
	lag := a.cfg.EndpointLag
	if lag <= 0 {
		return
	}
	if _, routed := r.set[pod]; !routed {
		return
	}
	if _, ok := r.lagging[pod]; ok {
		return
	}
	r.lagging[pod] = time.Now().Add(lag)
	time.AfterFunc(lag, func() { a.reroute(r) })
}

// reroute gives r's proxy the endpoints of r's slices that are pods of this
// agent, each at its loopback listener, ready as the slices say (an
// endpoint ready in any slice is ready), as kube-proxy programs a node. A
// pod being deleted keeps its endpoint as it was for the endpoint lag
// ([Config.EndpointLag]; whether or not its process is still there, as a
// node's rules still send traffic to a pod IP whose container exited),
// then becomes a terminating endpoint (no new requests) or leaves.
// Endpoints whose address is not a pod of this agent, or names another pod
// than the one holding that address now, are skipped.
func (a *Agent) reroute(r *route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	type target struct {
		addr                 string
		ready                bool
		terminating, serving bool
	}
	want := map[string]target{}
	a.mu.Lock()
	for _, eps := range r.slices {
		for _, e := range eps {
			run := a.byIP[e.address]
			if run == nil || run.port == 0 || (e.pod != "" && e.pod != run.name) || run.ns != r.ns {
				continue
			}
			t := want[run.name]
			t.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(run.port))
			t.ready = t.ready || e.ready
			t.terminating = t.terminating || e.terminating
			t.serving = t.serving || e.serving
			want[run.name] = t
		}
	}
	a.mu.Unlock()
	now := time.Now()
	lagging := func(p string) bool {
		due, ok := r.lagging[p]
		if ok && !now.Before(due) {
			delete(r.lagging, p)
			return false
		}
		return ok
	}
	pods := make([]string, 0, len(want))
	for p, t := range want {
		if t.terminating {
			// The slice may tell of the deletion before the agent's own
			// pod informer does: the lag starts at whichever comes first.
			a.startLagLocked(r, p)
		}
		pods = append(pods, p)
	}
	sort.Strings(pods)
	for i, p := range pods {
		t := want[p]
		if lagging(p) {
			continue // routed as before: the proxies have not learnt of it
		}
		if old, ok := r.set[p]; ok && old != t.addr {
			r.proxy.RemoveEndpoint(p)
		}
		if t.terminating && !t.ready {
			r.proxy.SetEndpointTerminating(p, t.addr, i, t.serving)
		} else {
			r.proxy.SetEndpoint(p, t.addr, i, t.ready)
		}
		r.set[p] = t.addr
	}
	for p := range r.set {
		if _, ok := want[p]; !ok && !lagging(p) {
			r.proxy.RemoveEndpoint(p)
			delete(r.set, p)
		}
	}
}
