package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/load"
)

// startCPU starts sampling the CPU of the run's parts (drill itself, each
// local service's replica trees, each PostgreSQL started from binaries)
// and of the machine, once a second from t=0. A run on a machine without
// /proc records no CPU: the failure is logged, never fatal.
func (r *run) startCPU(ctx context.Context) *cpuuse.Sampler {
	s, err := cpuuse.Start(ctx, cpuuse.Options{Parts: r.cpuParts(), Now: r.clock.Now, Log: r.log.With("component", "cpu")})
	if err != nil {
		r.log.Warn("the run's CPU will not be measured", "err", err)
		return nil
	}
	return s
}

// cpuParts lists what the sampler measures, in the summary's order.
func (r *run) cpuParts() []cpuuse.Part {
	inside := []string{"its load generator", "measurement", "probes", "observers"}
	if r.env.embedded != nil {
		inside = append(inside, "the embedded Toxiproxy")
	}
	if len(r.env.services) > 0 {
		inside = append(inside, "the local Services")
	}
	stubs := make([]string, 0, len(r.env.stubs))
	for name := range r.env.stubs {
		stubs = append(stubs, name)
	}
	slices.Sort(stubs)
	for _, name := range stubs {
		inside = append(inside, "the HTTP stub "+name)
	}
	note := "drill's own process: " + strings.Join(inside, ", ")
	parts := []cpuuse.Part{{Name: "drill", Kind: cpuuse.KindDrill, Self: true, Note: note}}
	for _, s := range r.sc.Services {
		svc, ok := r.env.services[s.Name]
		if !ok {
			continue
		}
		parts = append(parts, cpuuse.Part{Name: s.Name + " replicas", Kind: cpuuse.KindService, PIDs: func() []int {
			var pids []int
			for _, st := range svc.Status() {
				if st.PID > 0 {
					pids = append(pids, st.PID)
				}
			}
			return pids
		}, Note: "each replica's process and its descendants"})
	}
	for _, d := range r.sc.Dependencies {
		pg, ok := r.env.postgres[d.Name]
		if !ok || d.Postgres == nil {
			continue
		}
		if pg.PGID <= 0 {
			r.log.Info("the CPU of a dependency in a container is not measured", "dependency", d.Name)
			continue
		}
		pid := pg.PGID
		parts = append(parts, cpuuse.Part{Name: d.Name, Kind: cpuuse.KindDependency, PIDs: func() []int { return []int{pid} },
			Note: "the postmaster and its descendants (backends, background workers)"})
	}
	return parts
}

// labelledRouter runs a local Service's in-process routing under the
// service-proxy pprof label and gives the calling load worker its
// generator label back (cpuuse.LabelKey). Both contexts are made once: no
// allocation per request.
type labelledRouter struct {
	router  load.Router
	in, out context.Context
}

// RoundTripVia implements load.Router.
func (l labelledRouter) RoundTripVia(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	pprof.SetGoroutineLabels(l.in)
	defer pprof.SetGoroutineLabels(l.out)
	return l.router.RoundTripVia(base, req)
}

// BalancesPerConnection implements load.ConnRouter: the wrapped router's
// answer, false for a router that only balances per request.
func (l labelledRouter) BalancesPerConnection() bool {
	cr, ok := l.router.(load.ConnRouter)
	return ok && cr.BalancesPerConnection()
}

// DialVia implements load.ConnRouter (picking the endpoint is
// service-proxy work). It is called only when BalancesPerConnection is
// true.
func (l labelledRouter) DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	cr, ok := l.router.(load.ConnRouter)
	if !ok {
		return nil, errors.New("router does not balance per connection")
	}
	pprof.SetGoroutineLabels(l.in)
	defer pprof.SetGoroutineLabels(l.out)
	return cr.DialVia(ctx, dial)
}

// labelRouters wraps each router in a labelledRouter.
func labelRouters(routers map[string]load.Router) map[string]load.Router {
	in := cpuuse.Labelled(context.Background(), cpuuse.PartServiceProxy)
	out := cpuuse.Labelled(context.Background(), cpuuse.PartGenerator)
	for k, v := range routers {
		routers[k] = labelledRouter{router: v, in: in, out: out}
	}
	return routers
}
