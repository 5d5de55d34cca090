// Package event defines the run's clock and its time-stamped event log:
// faults on and off, phases, probe results, readiness, restarts, endpoint
// membership and metric samples. The local runtime and the Kubernetes
// observer produce the same event kinds, so assertions (pure functions of
// the plan and this log) do not care which side produced them.
//
// Per-request results are not events: the load engine keeps them as
// per-second histograms (internal/measure).
package event

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Clock is the run's single monotonic clock. Offsets are durations since
// Start (t=0, the moment load starts); wall-clock time is for display only.
// Safe for concurrent use.
type Clock struct {
	start atomic.Pointer[time.Time] // carries Go's monotonic reading
}

// NewClock starts a clock at now.
func NewClock() *Clock { return NewClockAt(time.Now()) }

// NewClockAt starts a clock at t (t should carry a monotonic reading).
func NewClockAt(t time.Time) *Clock {
	c := &Clock{}
	c.start.Store(&t)
	return c
}

// Start is the wall-clock (and monotonic) time of offset 0.
func (c *Clock) Start() time.Time { return *c.start.Load() }

// Now is the offset since Start, monotonic.
func (c *Clock) Now() time.Duration { return time.Since(c.Start()) }

// Offset converts a time taken on this machine to an offset; t must carry a
// monotonic reading (time.Now) for sub-millisecond accuracy.
func (c *Clock) Offset(t time.Time) time.Duration { return t.Sub(c.Start()) }

// Monotonic is this machine's CLOCK_MONOTONIC now, in ns: the reading
// that crosses processes. Go's own monotonic readings (in time.Time) are
// meaningful only inside the process that took them; a child process (a
// stand-in of the platform) stamps its events with this instead, and the
// run compares them with its own readings.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0 // Linux always has CLOCK_MONOTONIC; 0 marks a platform without
	}
	return ts.Nano()
}

// Rezero moves t=0 to now and returns how far it moved. The run calls it
// when load starts, then shifts the events recorded so far with
// [Log.Shift](-moved) so that bring-up events get negative offsets.
func (c *Clock) Rezero() time.Duration {
	now := time.Now()
	old := c.start.Swap(&now)
	return now.Sub(*old)
}

// RezeroAt moves t=0 to at and returns how far it moved (as [Clock.Rezero]
// does for now). A run whose load starts at an instant fixed in advance
// (the load workers' shared t=0) calls it once that instant has come; at
// should carry a monotonic reading (time.Now().Add(d), not a time stripped
// by UTC or Round(0)) for sub-millisecond offsets.
func (c *Clock) RezeroAt(at time.Time) time.Duration {
	old := c.start.Swap(&at)
	return at.Sub(*old)
}

// Kind names what an event records.
type Kind string

// Event kinds. Fields used by each kind are noted.
const (
	// PhaseStart marks a timeline phase (Detail: warmup, baseline, load-start, load-end, ...).
	PhaseStart Kind = "phase"
	// FaultOn and FaultOff bracket an injected fault (Fault; Detail: the toxic or action).
	FaultOn  Kind = "fault-on"
	FaultOff Kind = "fault-off"
	// FaultError records a failed apply or revert (Fault, Detail).
	FaultError Kind = "fault-error"
	// StopFired records a stop condition firing (Detail: name and action).
	StopFired Kind = "stop-condition"

	// ProbeResult is one probe execution (Pod, Container, Probe, OK, Detail: why it failed, Value: seconds taken).
	ProbeResult Kind = "probe"
	// PodReady / PodUnready: the pod's Ready condition turned True / False (Pod).
	PodReady   Kind = "pod-ready"
	PodUnready Kind = "pod-unready"
	// PodStarted: a container (re)started or a new pod appeared (Pod, Container, RestartCount).
	PodStarted Kind = "pod-started"
	// ContainerRestart: restartCount rose (Pod, Container, RestartCount,
	// Reason e.g. "liveness probe failed", Probe, Logs). At is the
	// restart's cause, not the new process (that is PodStarted): a probe
	// kill when it was decided (the kubelet's Killing Event), a crash when
	// the process exited; it may be earlier than events emitted before it.
	ContainerRestart Kind = "container-restart"
	// PodDeleted: a watched pod is gone (Pod, Reason).
	PodDeleted Kind = "pod-deleted"
	// PodCreated: a new pod of the watched set appeared (Pod).
	PodCreated Kind = "pod-created"

	// EndpointReady: the pod's endpoint is in the Service's EndpointSlices
	// with conditions.ready=true (Service, Pod, Address).
	EndpointReady Kind = "endpoint-ready"
	// EndpointNotReady: the endpoint is present with conditions.ready=false
	// (Service, Pod, Address; Detail: serving/terminating flags).
	EndpointNotReady Kind = "endpoint-not-ready"
	// EndpointRemoved: the endpoint is gone from every slice (Service, Pod,
	// Address). From a local Service, Value is how many requests routed to
	// it failed at the backend over its life (answered 502).
	EndpointRemoved Kind = "endpoint-removed"

	// DependencyAnswered: the first bytes a dependency sent back through a
	// proxy reached its client (Labels["proxy"]; Value the bytes counted
	// then). At is when drill saw the proxy's live counter move, at most a
	// poll (20 ms) after the bytes passed.
	DependencyAnswered Kind = "dependency-answered"

	// Metric is one sample of a scraped or queried series (Metric, Labels, Value).
	Metric Kind = "metric"
	// K8sEvent is a Kubernetes Event about a watched pod (Pod, Reason, Detail).
	K8sEvent Kind = "k8s-event"
	// Note is free text worth keeping on the timeline (Detail).
	Note Kind = "note"
	// Operator is an action taken from the game-day console (Operator: who,
	// Reason: the action such as "end", "hold", "annotation"; Fault when it
	// concerns one; Detail: the annotation's text or what happened).
	Operator Kind = "operator"
)

// Metric names drill records itself (Kind Metric) from what it observes.
const (
	// MetricTraefikNoRouter counts a service's requests that Traefik
	// answered 404 with no router, per second of the run's clock, from its
	// access log (At the second's start, Service the Compose service,
	// Value the count).
	MetricTraefikNoRouter = "traefik_no_router_requests"
	// MetricTraefikNoServer counts those Traefik answered a 5xx itself
	// with no server, per second, likewise.
	MetricTraefikNoServer = "traefik_no_server_requests"
)

// Probe names.
const (
	ProbeStartup   = "startup"
	ProbeLiveness  = "liveness"
	ProbeReadiness = "readiness"
	// ProbeHealthcheck is a container engine's HEALTHCHECK (Compose's
	// healthcheck): the one check behind `up --wait`, depends_on
	// service_healthy and, through Traefik, routing.
	ProbeHealthcheck = "healthcheck"
)

// Event is one time-stamped observation. At is the offset on the run's
// clock (negative: before load started, e.g. while services came up).
type Event struct {
	At   time.Duration `json:"at"`
	Kind Kind          `json:"kind"`
	// Source is who saw it: "local-runtime", "kubernetes", "scrape", "run".
	Source string `json:"source,omitempty"`

	Service      string            `json:"service,omitempty"`
	Pod          string            `json:"pod,omitempty"`
	Container    string            `json:"container,omitempty"`
	Address      string            `json:"address,omitempty"`
	Probe        string            `json:"probe,omitempty"`
	OK           bool              `json:"ok,omitempty"`
	RestartCount int32             `json:"restartCount,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Fault        string            `json:"fault,omitempty"`
	Metric       string            `json:"metric,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Value        float64           `json:"value,omitempty"`
	Detail       string            `json:"detail,omitempty"`
	// Operator is who took an operator action (the console token's label).
	Operator string `json:"operator,omitempty"`
	// Logs are the last log lines of a replica (restarts).
	Logs []string `json:"logs,omitempty"`
}

// Sink receives events. Implementations must be safe for concurrent use.
type Sink interface {
	Emit(Event)
}

// Log is an append-only, concurrency-safe event log. The zero value is
// ready to use.
type Log struct {
	mu     sync.Mutex
	events []Event
	subs   []chan<- Event
}

// Emit appends e. Subscribers get a copy without blocking: a full
// subscriber channel drops the event for that subscriber only.
func (l *Log) Emit(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	subs := l.subs
	l.mu.Unlock()
	for _, s := range subs {
		select {
		case s <- e:
		default:
		}
	}
}

// Subscribe sends every later event to ch (non-blocking; size ch generously).
func (l *Log) Subscribe(ch chan<- Event) {
	l.mu.Lock()
	l.subs = append(l.subs, ch)
	l.mu.Unlock()
}

// Events returns a copy of the log sorted by At (stable: equal times keep
// emission order).
func (l *Log) Events() []Event {
	l.mu.Lock()
	out := make([]Event, len(l.events))
	copy(out, l.events)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Shift adds d to the offset of every event recorded so far.
func (l *Log) Shift(d time.Duration) {
	l.mu.Lock()
	for i := range l.events {
		l.events[i].At += d
	}
	l.mu.Unlock()
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f(e).
func (f SinkFunc) Emit(e Event) { f(e) }

var _ Sink = (*Log)(nil)

// Follow returns a copy of the events logged so far, in emission order,
// and from then on sends every new event to ch as [Log.Subscribe] does
// (non-blocking: size ch generously). The two happen at once, so no event
// is missed between them or seen twice.
func (l *Log) Follow(ch chan<- Event) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Event, len(l.events))
	copy(out, l.events)
	l.subs = append(l.subs, ch)
	return out
}

// ReasonEvictionRefused is the Reason of the K8sEvent a kubernetes
// pod-kill or drain emits when the eviction API refused an eviction (a
// PodDisruptionBudget would be violated, HTTP 429); the pod stays.
const ReasonEvictionRefused = "EvictionRefused"

// LabelSince is the label of an endpoint-removed or endpoint-ready event
// that bounds the change from below, where the observer saw requests on
// both sides of it (Traefik's access log): the start, in ns on the run's
// clock as a decimal integer, of the latest request in the other state
// (forwarded before a removal, answered by the router itself before a
// return). The change happened between that instant and the event's At.
const LabelSince = "since"
