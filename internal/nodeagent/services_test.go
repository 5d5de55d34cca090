package nodeagent

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
)

// endpointLog records a route's endpoint events with the wall-clock time
// they came.
type endpointLog struct {
	mu  sync.Mutex
	evs []loggedEndpoint
}

type loggedEndpoint struct {
	at     time.Time
	kind   event.Kind
	pod    string
	detail string
}

func (l *endpointLog) Emit(e event.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, loggedEndpoint{at: time.Now(), kind: e.Kind, pod: e.Pod, detail: e.Detail})
}

func (l *endpointLog) snapshot() []loggedEndpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedEndpoint(nil), l.evs...)
}

// waitFor waits up to timeout for n events and returns them.
func (l *endpointLog) waitFor(t *testing.T, n int, timeout time.Duration) []loggedEndpoint {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs := l.snapshot()
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRerouteEndpointLag: a pod whose deletion began stays routed as
// before for the endpoint lag, whether the agent's pod informer (the
// kubelet's SIGTERM) or the EndpointSlice tells of it first and whether
// or not its process has already gone; after the lag it becomes a
// terminating endpoint, or leaves when it is gone. With no lag the proxy
// follows the slice at once.
func TestRerouteEndpointLag(t *testing.T) {
	t.Parallel()
	const lag = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		lag  time.Duration
		// sigtermFirst: the agent starts terminating the pod before the
		// slice marks its endpoint terminating; exits: its process is gone
		// (released) before the lag is over.
		sigtermFirst, exits bool
		want                []string // kinds after EndpointReady, in order
		minDelay            time.Duration
	}{
		{"slice first, pod drains", lag, false, false, []string{"endpoint-not-ready ready=false serving=true terminating=true"}, lag},
		{"SIGTERM first, pod drains", lag, true, false, []string{"endpoint-not-ready ready=false serving=true terminating=true"}, lag},
		{"SIGTERM first, pod exits at once", lag, true, true, []string{"endpoint-removed"}, lag},
		{"no lag", 0, false, false, []string{"endpoint-not-ready ready=false serving=true terminating=true"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &endpointLog{}
			proxy := localenv.NewRouter("web", localenv.PerRequest, event.NewClock(), log, EventSource,
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			r := &route{ns: "ns", name: "web", proxy: proxy, slices: map[string][]endpointRef{},
				set: map[string]string{}, lagging: map[string]time.Time{}}
			run := &podRun{key: "ns/web-1", ns: "ns", name: "web-1", ip: "192.0.2.2", port: 40001}
			a := &Agent{routes: []*route{r}, byIP: map[string]*podRun{run.ip: run}, pods: map[string]*podRun{run.key: run}}
			a.cfg.EndpointLag = tc.lag

			r.slices["web-abc"] = []endpointRef{{address: run.ip, pod: run.name, ready: true, serving: true}}
			a.reroute(r)
			if evs := log.waitFor(t, 1, time.Second); len(evs) != 1 || evs[0].kind != event.EndpointReady {
				t.Fatalf("after the ready endpoint: %+v, want one endpoint-ready", evs)
			}

			began := time.Now()
			if tc.sigtermFirst {
				a.lagDeletion(run)
			}
			r.mu.Lock()
			r.slices["web-abc"] = []endpointRef{{address: run.ip, pod: run.name, terminating: true, serving: true}}
			r.mu.Unlock()
			a.reroute(r)
			if tc.exits {
				a.mu.Lock()
				delete(a.byIP, run.ip)
				delete(a.pods, run.key)
				a.mu.Unlock()
				r.mu.Lock()
				delete(r.slices, "web-abc")
				r.mu.Unlock()
				a.reroute(r)
			}
			evs := log.waitFor(t, 1+len(tc.want), 5*time.Second)
			var got []string
			for _, e := range evs[1:] {
				s := string(e.kind)
				if e.kind == event.EndpointNotReady {
					s += " " + e.detail
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("endpoint events after the deletion began: %q, want %q", got, tc.want)
			}
			if d := evs[1].at.Sub(began); d < tc.minDelay {
				t.Errorf("the endpoint changed %s after the deletion began, want at least the lag %s", d, tc.minDelay)
			}
			// Nothing more comes (the lag's own reroute changes nothing).
			time.Sleep(lag + 100*time.Millisecond)
			if n := len(log.snapshot()); n != 1+len(tc.want) {
				t.Errorf("%d endpoint events in all, want %d: %+v", n, 1+len(tc.want), log.snapshot())
			}
		})
	}
}
