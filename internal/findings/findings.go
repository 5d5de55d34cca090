// Package findings says what happened in a run, asked or not
// (docs/DESIGN.md §10): for every fault and every service, when readiness reacted
// (detection), when replicas left and re-entered routing, each interval
// with no ready endpoint, how requests failed, when each stream recovered,
// restarts and errors by phase. A finding is a figure in plain words with
// a severity; findings never change a run's exit code (the assertion kinds
// `unroutable` and `detection` gate on the same figures).
//
// [Compute] is pure: it reads the plan, the scenario, the event log and
// the per-second series, and uses no clock and no I/O, so `drill report`
// computes the same findings from any run.json, older ones included.
package findings

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/scenario"
)

// SchemaVersion names the shape of [Finding] as written in run.json's
// "findings" (with "findingsSchema" beside it).
const SchemaVersion = "drill.dev/findings/v1"

// Severity ranks a finding.
type Severity string

// Severities, in increasing order of concern.
const (
	// Info is a figure worth recording.
	Info Severity = "info"
	// Notice is worth a look.
	Notice Severity = "notice"
	// Warning: the system did something its operators would not expect.
	Warning Severity = "warning"
)

// rank orders severities for sorting (warning first).
func (s Severity) rank() int {
	switch s {
	case Warning:
		return 0
	case Notice:
		return 1
	}
	return 2
}

// Kind names what a finding is about.
type Kind string

// Finding kinds.
const (
	// KindDetection: fault on -> first and last replica unready.
	KindDetection Kind = "detection"
	// KindRoutingLag: fault on -> replicas left routing; fault off -> back.
	KindRoutingLag Kind = "routing-lag"
	// KindUnroutable: an interval with no replica in routing.
	KindUnroutable Kind = "unroutable"
	// KindShedding: how a stream's requests failed or were shed per window.
	KindShedding Kind = "shedding"
	// KindRecovery: fault off -> error rate and p99 back to the baseline's.
	KindRecovery Kind = "recovery"
	// KindRestarts: restarts by phase.
	KindRestarts Kind = "restarts"
	// KindCrashLoop: a replica entered CrashLoopBackOff.
	KindCrashLoop Kind = "crash-loop"
	// KindErrors: a stream's errors before, during and after a fault.
	KindErrors Kind = "errors-by-phase"
	// KindClaim: a time a source document claims, beside the one measured.
	KindClaim Kind = "claim"
	// KindPodFailures: requests that failed at the backend on each pod a
	// platform fault (pod-kill, rollout) deleted, from its deletion to its
	// leaving the Service.
	KindPodFailures Kind = "pod-failures"
	// KindKeptRouting: behind the real Traefik, a container Docker
	// reported unready that Traefik kept routing (not an unroutable
	// interval: requests still reached it).
	KindKeptRouting Kind = "kept-routing"
)

// Severity rules: the Rule a finding carries names the one that set its
// severity. Each is documented in docs/findings.md.
const (
	RuleUnroutableAfterFault = "unroutable-after-fault"          // warning: no ready replica for 1 s or more after the fault ended
	RuleUnroutableNoFault    = "unroutable-without-fault"        // warning: no ready replica and no fault on
	RuleUnroutableDuring     = "unroutable-during-fault"         // notice: no ready replica while the fault was on
	RuleLateDetection        = "detection-at-or-after-end"       // warning: routing did not react while the fault lasted (first unready in its last second or later)
	RuleErrorsAfter          = "more-errors-after-fault"         // warning: more errors after a fault than during it
	RuleSomeErrorsAfter      = "errors-after-fault"              // notice: errors after the fault ended
	RuleRestartDuringFault   = "restart-during-fault"            // warning: a replica restarted while a fault was on
	RuleRestartBeforeLoad    = "restart-before-load"             // warning: replicas restarted before load began
	RuleRestartOther         = "restart"                         // notice: restarts outside a fault
	RuleCrashLoop            = "crash-loop"                      // warning: CrashLoopBackOff entered
	RuleNotRecovered         = "not-recovered"                   // warning: a stream did not recover before the run ended
	RuleNotReturned          = "not-back-in-routing"             // warning: replicas that left routing never came back
	RuleClaimMismatch        = "claim-differs"                   // notice: a claimed time differs from the measured one
	RulePodFailures          = "requests-failed-on-deleted-pods" // notice: requests failed on pods a platform fault deleted
	RuleTraefikKeptRouting   = "traefik-kept-routing"            // warning: Docker reported a container unready for 3 s or more and Traefik kept routing its service
)

// Figure is one number of a finding: Value in Unit ("s", "count",
// "ratio", "periods"), Text as printed.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Text  string  `json:"text"`
}

// Finding is one thing that happened, in plain words with its figures.
type Finding struct {
	Kind     Kind     `json:"kind"`
	Severity Severity `json:"severity"`
	// Rule names the severity rule that applied (empty for plain info).
	Rule    string `json:"rule,omitempty"`
	Service string `json:"service,omitempty"`
	Fault   string `json:"fault,omitempty"`
	Stream  string `json:"stream,omitempty"`
	Pod     string `json:"pod,omitempty"`
	// Start and End bound what the finding is about on the run's clock
	// (ns; both zero when it is not about a span).
	Start time.Duration `json:"start,omitempty"`
	End   time.Duration `json:"end,omitempty"`
	// Figures are the numbers behind Text.
	Figures []Figure `json:"figures,omitempty"`
	// Text is the finding in one line for people.
	Text string `json:"text"`
}

// Options tunes the recovery finding.
type Options struct {
	// RecoveryP99Factor: a stream has recovered when its p99 over the hold
	// is at most this factor times the baseline's p99 (and at most 5 ms
	// above it counts too, for very fast baselines). Default 2.
	RecoveryP99Factor float64
	// RecoveryErrorDelta: ... and its error rate at most the baseline's
	// plus this (0..1). Default 0.005 (half a percentage point).
	RecoveryErrorDelta float64
	// RecoveryHold is how long both must hold. Default 5 s.
	RecoveryHold time.Duration
}

// Defaults for [Options].
const (
	DefaultRecoveryP99Factor  = 2.0
	DefaultRecoveryErrorDelta = 0.005
	DefaultRecoveryHold       = 5 * time.Second
	// recoveryP99Slack lets a very fast baseline's p99 (a few ms) double
	// without counting as unrecovered.
	recoveryP99Slack = 5 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.RecoveryP99Factor <= 0 {
		o.RecoveryP99Factor = DefaultRecoveryP99Factor
	}
	if o.RecoveryErrorDelta <= 0 {
		o.RecoveryErrorDelta = DefaultRecoveryErrorDelta
	}
	if o.RecoveryHold <= 0 {
		o.RecoveryHold = DefaultRecoveryHold
	}
	return o
}

// Input is what findings are computed from: a run's plan, scenario (for
// probe periods, claims and which stream targets which service; may be
// nil), event log and per-stream series.
type Input struct {
	Plan     *plan.Plan
	Scenario *scenario.Scenario
	Events   []event.Event
	Series   map[string]*measure.Series
	Options  Options
}

// faultSpan is one fault's actual on and off times.
type faultSpan struct {
	name    string
	on, off time.Duration
	// recEnd is the end of its recovery window (or of the run).
	recEnd time.Duration
	// offSeen is false when the log has no fault-off (run cut short).
	offSeen bool
	// platform: the fault ends or replaces pods itself (pod-kill,
	// rollout), so replicas going unready are its doing, not the
	// service's detection of a failing dependency.
	platform bool
}

func (f faultSpan) length() time.Duration { return f.off - f.on }

// ctx is the state shared by the per-kind computations.
type ctx struct {
	in       Input
	events   []event.Event
	faults   []faultSpan
	end      time.Duration // end of the measured run (load end or plan end)
	services []string
	routes   map[string]routing.Timeline
	unroute  map[string][]routing.Interval
	opt      Options
}

// Compute returns the run's findings, warnings first, then notices, then
// info, each group in order of time. It returns nil when there is nothing
// to say (no plan).
func Compute(in Input) []Finding {
	if in.Plan == nil {
		return nil
	}
	c := &ctx{in: in, opt: in.Options.withDefaults()}
	c.events = make([]event.Event, len(in.Events))
	copy(c.events, in.Events)
	sort.SliceStable(c.events, func(i, j int) bool { return c.events[i].At < c.events[j].At })
	c.end = runEnd(in.Plan, c.events)
	c.faults = faultSpans(in.Plan, c.events, c.end)
	if in.Scenario != nil {
		for i := range c.faults {
			for _, f := range in.Scenario.Faults {
				if f.Name == c.faults[i].name && (f.Type == scenario.FaultPodKill || f.Type == scenario.FaultRollout || f.Type == scenario.FaultDrain) {
					c.faults[i].platform = true
				}
			}
		}
	}
	c.services = routing.Services(c.events)
	c.routes = map[string]routing.Timeline{}
	c.unroute = map[string][]routing.Interval{}
	for _, s := range c.services {
		tl := routing.For(c.events, s)
		c.routes[s] = tl
		c.unroute[s] = tl.Unroutable(0, c.end)
	}

	var out []Finding
	for _, f := range c.faults {
		for _, s := range c.services {
			if !f.platform { // a platform fault's unready pods are its own doing
				out = append(out, c.detection(f, s)...)
			} else {
				out = append(out, c.podFailures(f, s)...)
			}
			out = append(out, c.routingLag(f, s)...)
		}
	}
	for _, s := range c.services {
		out = append(out, c.unroutable(s)...)
		out = append(out, c.restarts(s)...)
		out = append(out, c.crashLoops(s)...)
	}
	for _, name := range c.streamNames() {
		for _, f := range c.faults {
			out = append(out, c.shedding(name, f)...)
			out = append(out, c.recovery(name, f)...)
			out = append(out, c.errorsByPhase(name, f)...)
		}
	}
	out = append(out, c.claims()...)
	out = append(out, c.evictionsRefused()...)
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Compare(a.Severity.rank(), b.Severity.rank())
	})
	return out
}

// runEnd is when measurement ended: the load-end phase event when the log
// has one before the plan's end, else the plan's duration.
func runEnd(p *plan.Plan, evs []event.Event) time.Duration {
	end := p.Duration
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == event.PhaseStart && evs[i].Detail == "load-end" {
			if evs[i].At > 0 && evs[i].At < end {
				end = evs[i].At
			}
			break
		}
	}
	return end
}

// faultSpans reads each planned fault's actual on/off times from the log
// (fault-on / fault-off events), falling back to the plan's times.
func faultSpans(p *plan.Plan, evs []event.Event, end time.Duration) []faultSpan {
	var out []faultSpan
	idx := map[string]int{}
	for _, a := range p.Actions {
		if a.Kind != plan.FaultOn {
			continue
		}
		idx[a.Target] = len(out)
		out = append(out, faultSpan{name: a.Target, on: a.At, off: -1})
	}
	for _, a := range p.Actions {
		if i, ok := idx[a.Target]; ok && a.Kind == plan.FaultOff {
			out[i].off = a.At
		}
	}
	seenOn := map[string]bool{}
	for _, e := range evs {
		i, ok := idx[e.Fault]
		if !ok {
			continue
		}
		switch e.Kind {
		case event.FaultOn:
			if !seenOn[e.Fault] {
				out[i].on = e.At
				seenOn[e.Fault] = true
			}
		case event.FaultOff:
			out[i].off, out[i].offSeen = e.At, true
		}
	}
	for i := range out {
		f := &out[i]
		// A fault still on when measurement stopped (or whose off came
		// after it) is cut at the run's end.
		if f.off < 0 || f.off > end {
			f.off, f.offSeen = end, false
		}
		f.recEnd = end
		if w, ok := p.Window("recovery:" + f.name); ok && w.End > f.off {
			f.recEnd = w.End
		}
		if f.recEnd > end {
			f.recEnd = end
		}
	}
	// Faults that never turned on (the run ended first) say nothing.
	kept := out[:0]
	for _, f := range out {
		if f.on < end {
			kept = append(kept, f)
		}
	}
	return kept
}

// readinessPeriod is the service's readiness probe period from the
// scenario (0 when unknown).
func (c *ctx) readinessPeriod(service string) time.Duration {
	if c.in.Scenario == nil {
		return 0
	}
	for _, s := range c.in.Scenario.Services {
		if s.Name == service && s.Probes.ReadinessProbe != nil {
			p := s.Probes.ReadinessProbe.PeriodSeconds
			if p <= 0 {
				p = 10
			}
			return time.Duration(p) * time.Second
		}
	}
	return 0
}

// seconds renders d as "11.0 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// at renders an offset as "t=35.0".
func at(d time.Duration) string { return fmt.Sprintf("t=%.1f", d.Seconds()) }

func secFigure(name string, d time.Duration) Figure {
	return Figure{Name: name, Value: roundTo(d.Seconds(), 3), Unit: "s", Text: seconds(d)}
}

func countFigure(name string, n int64) Figure {
	return Figure{Name: name, Value: float64(n), Unit: "count", Text: thousands(n)}
}

func ratioFigure(name string, r float64) Figure {
	return Figure{Name: name, Value: roundTo(r, 6), Unit: "ratio", Text: assert.FormatPercent(r)}
}

func roundTo(v float64, n int) float64 {
	p := 1.0
	for i := 0; i < n; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

// thousands renders n with thousands separators: 27916 -> "27,916".
func thousands(n int64) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// streamNames lists the recorded streams, sorted.
func (c *ctx) streamNames() []string {
	var out []string
	for n, s := range c.in.Series {
		if s != nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// window merges a stream's buckets with start in [from, to).
func (c *ctx) window(stream string, from, to time.Duration) *measure.Bucket {
	s := c.in.Series[stream]
	if s == nil || to <= from {
		return measure.NewBucket(from, 0)
	}
	return s.Window(from, to)
}

// serviceOf returns the service a stream's targets address ("" when none
// or several): a target URL written with ${services.<name>.url|addr}, or
// starting with a kubernetes service's url.
func (c *ctx) serviceOf(stream string) string {
	sc := c.in.Scenario
	if sc == nil {
		return ""
	}
	found := ""
	for _, st := range sc.Streams {
		if st.Name != stream {
			continue
		}
		for _, t := range st.Targets {
			name := ""
			if i := strings.Index(t.URL, "${services."); i >= 0 {
				rest := t.URL[i+len("${services."):]
				if j := strings.IndexByte(rest, '.'); j > 0 {
					name = rest[:j]
				}
			} else {
				for _, svc := range sc.Services {
					if svc.URL != "" && strings.HasPrefix(t.URL, svc.URL) {
						name = svc.Name
					}
				}
			}
			if name == "" || found != "" && name != found {
				return ""
			}
			found = name
		}
	}
	return found
}
