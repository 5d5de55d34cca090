// Package routing reconstructs, from a run's event log, which replicas of
// each service were in routing at every moment: the set a client's
// request could reach. In kubernetes mode that is the Service's
// EndpointSlices (endpoints with conditions.ready=true, as the real
// EndpointSlice controller publishes them); in local mode it is drill's
// own local Service, which routes only to ready replicas. A service whose
// log carries no endpoint events falls back to the pods' Ready condition.
//
// Everything here is a pure function of the events (no I/O, no clock), so
// assertions and findings computed from it give the same answer when
// `drill report` re-reads a run.json (docs/DESIGN.md §9, §10).
package routing

import (
	"sort"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// Source says what a service's routing figures were measured on.
type Source string

// Sources of routing state.
const (
	// EndpointSlice: the Service's EndpointSlices, from drill's watch of
	// the real EndpointSlice controller (kubernetes mode).
	EndpointSlice Source = "EndpointSlice"
	// LocalService: drill's own local Service, which drops a replica the
	// moment the local runtime marks it unready (local mode). It is not an
	// EndpointSlice: its removal figures measure drill, not a controller.
	LocalService Source = "local Service"
	// TraefikRules: drill's former gateway following Traefik's
	// Docker-provider rules in a compose run; only records made before
	// compose runs went behind the real Traefik carry it.
	TraefikRules Source = "Traefik-rule gateway"
	// TraefikAccessLog: the real Traefik of a compose run, read from its
	// JSON access log (internal/traefik): a replica leaves routing at the
	// first request Traefik answered itself with 404 (no router) or 503
	// (no server) and is back at the first it forwarded again.
	TraefikAccessLog Source = "Traefik access log"
	// PodReady: no endpoint events were recorded; the pods' Ready
	// condition stands in for routing.
	PodReady Source = "pod Ready condition"
)

// Interval is a span [Start, End) on the run's clock.
type Interval struct {
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
}

// Len is End-Start.
func (iv Interval) Len() time.Duration { return iv.End - iv.Start }

// Clip returns iv cut to [from, to) and whether anything is left.
func (iv Interval) Clip(from, to time.Duration) (Interval, bool) {
	if iv.Start < from {
		iv.Start = from
	}
	if iv.End > to {
		iv.End = to
	}
	return iv, iv.End > iv.Start
}

// Change is one replica entering or leaving routing.
type Change struct {
	At  time.Duration
	Pod string
	In  bool
}

// Timeline is one service's routing history.
type Timeline struct {
	Service string
	Source  Source
	// Pods are the replicas ever seen, sorted.
	Pods []string
	// Changes are the replicas' routing changes in time order; a change
	// that repeats the pod's current state is dropped.
	Changes []Change
}

// Services lists the services named by pod, readiness or endpoint events,
// sorted.
func Services(events []event.Event) []string {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Service != "" && (isEndpoint(e.Kind) || isReadiness(e.Kind) || e.Kind == event.ContainerRestart) {
			seen[e.Service] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func isEndpoint(k event.Kind) bool {
	return k == event.EndpointReady || k == event.EndpointNotReady || k == event.EndpointRemoved
}

func isReadiness(k event.Kind) bool { return k == event.PodReady || k == event.PodUnready }

// For builds service's routing timeline from events (sorted by At or
// not). It uses endpoint events when the service has any, else the pods'
// Ready condition.
func For(events []event.Event, service string) Timeline {
	evs := sorted(events)
	tl := Timeline{Service: service, Source: PodReady}
	useEndpoints := false
	for _, e := range evs {
		if e.Service == service && isEndpoint(e.Kind) {
			useEndpoints = true
			tl.Source = EndpointSlice
			switch e.Source {
			case "local-runtime":
				tl.Source = LocalService
			case "traefik-rules":
				tl.Source = TraefikRules
			case "traefik-accesslog":
				tl.Source = TraefikAccessLog
			}
			break
		}
	}
	state := map[string]bool{}
	for _, e := range evs {
		if e.Service != service || e.Pod == "" {
			continue
		}
		var in bool
		switch {
		case useEndpoints && e.Kind == event.EndpointReady:
			in = true
		case useEndpoints && (e.Kind == event.EndpointNotReady || e.Kind == event.EndpointRemoved):
			in = false
		case !useEndpoints && e.Kind == event.PodReady:
			in = true
		case !useEndpoints && (e.Kind == event.PodUnready || e.Kind == event.PodDeleted):
			in = false
		default:
			continue
		}
		cur, seen := state[e.Pod]
		if !seen {
			tl.Pods = append(tl.Pods, e.Pod)
		}
		if seen && cur == in || !seen && !in {
			state[e.Pod] = in
			continue
		}
		state[e.Pod] = in
		tl.Changes = append(tl.Changes, Change{At: e.At, Pod: e.Pod, In: in})
	}
	sort.Strings(tl.Pods)
	return tl
}

// InAt returns the replicas in routing at t (changes at exactly t count).
func (tl Timeline) InAt(t time.Duration) map[string]bool {
	in := map[string]bool{}
	for _, c := range tl.Changes {
		if c.At > t {
			break
		}
		in[c.Pod] = c.In
	}
	for p, ok := range in {
		if !ok {
			delete(in, p)
		}
	}
	return in
}

// Unroutable returns the intervals inside [from, to) in which the service
// had no replica in routing, after it first had one (a service still
// coming up is not unroutable). An interval still open at to ends at to.
func (tl Timeline) Unroutable(from, to time.Duration) []Interval {
	var out []Interval
	in := map[string]bool{}
	everIn := false
	var start time.Duration
	open := false
	closeAt := func(t time.Duration) {
		if iv, ok := (Interval{Start: start, End: t}).Clip(from, to); ok {
			out = append(out, iv)
		}
		open = false
	}
	for _, c := range tl.Changes {
		if c.At >= to {
			break
		}
		if c.In {
			in[c.Pod] = true
		} else {
			delete(in, c.Pod)
		}
		switch {
		case len(in) > 0:
			everIn = true
			if open {
				closeAt(c.At)
			}
		case everIn && !open:
			start, open = c.At, true
		}
	}
	if open {
		closeAt(to)
	}
	return out
}

// Left returns, per replica, the first time at or after from (and before
// to) it left routing. Replicas that did not leave are absent.
func (tl Timeline) Left(from, to time.Duration) map[string]time.Duration {
	return tl.firstChange(from, to, false)
}

// Back returns, per replica, the first time at or after from (and before
// to) it entered routing. Replicas that did not enter are absent.
func (tl Timeline) Back(from, to time.Duration) map[string]time.Duration {
	return tl.firstChange(from, to, true)
}

func (tl Timeline) firstChange(from, to time.Duration, in bool) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range tl.Changes {
		if c.At < from || c.At >= to || c.In != in {
			continue
		}
		if _, ok := out[c.Pod]; !ok {
			out[c.Pod] = c.At
		}
	}
	return out
}

// Unready returns, per pod of service, the first time at or after from
// (and before to) its Ready condition turned False. Detection
// (docs/DESIGN.md §10) is measured on readiness, not on routing, so it
// reads the pod events whatever routing source the service has.
func Unready(events []event.Event, service string, from, to time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, e := range sorted(events) {
		if e.Service != service || e.Kind != event.PodUnready || e.At < from || e.At >= to {
			continue
		}
		if _, ok := out[e.Pod]; !ok {
			out[e.Pod] = e.At
		}
	}
	return out
}

// FirstLast returns the earliest and latest times of m and whether m is
// non-empty.
func FirstLast(m map[string]time.Duration) (first, last time.Duration, ok bool) {
	for _, t := range m {
		if !ok || t < first {
			first = t
		}
		if !ok || t > last {
			last = t
		}
		ok = true
	}
	return first, last, ok
}

// sorted returns events sorted by At (stable), copying only when needed.
func sorted(events []event.Event) []event.Event {
	if sort.SliceIsSorted(events, func(i, j int) bool { return events[i].At < events[j].At }) {
		return events
	}
	out := make([]event.Event, len(events))
	copy(out, events)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
