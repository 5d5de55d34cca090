package runner

import (
	"context"
	"strings"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/standin"
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
	if len(r.env.services) > 0 {
		inside = append(inside, "the local Services' choice of endpoint for its load")
	}
	note := "drill's own process: " + strings.Join(inside, ", ")
	parts := []cpuuse.Part{{Name: "drill", Kind: cpuuse.KindDrill, Self: true, Note: note}}
	var listeners []int // the local Services' listeners: one part
	for _, p := range r.env.standIns {
		pid := p.PID()
		if p.Role() == standin.RoleService {
			listeners = append(listeners, pid)
			continue
		}
		parts = append(parts, cpuuse.Part{Name: p.Name(), Kind: cpuuse.KindPlatform, PIDs: func() []int { return []int{pid} },
			Note: standInNote(p.Name())})
	}
	if len(listeners) > 0 {
		parts = append(parts, cpuuse.Part{Name: standInServices, Kind: cpuuse.KindPlatform, PIDs: func() []int { return listeners },
			Note: "the local Services' listeners, for clients other than drill's load, in processes of their own"})
	}
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

// standInNote says what a stand-in's CPU part holds.
func standInNote(name string) string {
	switch name {
	case standInToxiproxy:
		return "the run's Toxiproxy server, in a process of its own: its proxies, links and toxics"
	case standInStubs:
		return "the HTTP stub dependencies, in a process of their own"
	}
	return "a stand-in of the platform, in a process of its own"
}
