package nodeagent

import (
	"net"
	"sort"
	"strconv"
	"sync"

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
}

// endpointRef is one endpoint of a slice, as the proxy needs it.
type endpointRef struct {
	address string // the pod IP the slice names (192.0.2.x)
	pod     string // targetRef name ("" if none)
	ready   bool
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
			e := endpointRef{address: ep.Addresses[0], ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
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

// reroute gives r's proxy the endpoints of r's slices that are pods of this
// agent, each at its loopback listener, ready as the slices say (an
// endpoint ready in any slice is ready), as kube-proxy programs a node.
// Endpoints whose address is not a pod of this agent, or names another pod
// than the one holding that address now, are skipped.
func (a *Agent) reroute(r *route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	type target struct {
		addr  string
		ready bool
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
			want[run.name] = t
		}
	}
	a.mu.Unlock()
	pods := make([]string, 0, len(want))
	for p := range want {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	for i, p := range pods {
		t := want[p]
		if old, ok := r.set[p]; ok && old != t.addr {
			r.proxy.RemoveEndpoint(p)
		}
		r.proxy.SetEndpoint(p, t.addr, i, t.ready)
		r.set[p] = t.addr
	}
	for p := range r.set {
		if _, ok := want[p]; !ok {
			r.proxy.RemoveEndpoint(p)
			delete(r.set, p)
		}
	}
}
