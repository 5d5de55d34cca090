package control

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// liveJudging is how the console judges assertions of kind t while the
// run lives, as the kind's spec declares it ([scenario.LiveAtEnd] for a
// kind the registry does not know). A kind judged on seconds is merged
// over its window (isolation: over the window and the baseline) as the
// engine closes them ([Windows]).
func liveJudging(t scenario.AssertionType) scenario.LiveJudging {
	if sp, ok := scenario.AssertionSpecOf(t); ok {
		return sp.Live
	}
	return scenario.LiveAtEnd
}

// Provisional is an assertion's verdict on the data so far.
type Provisional struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Window string `json:"window"`
	// Provisional is true while the run lives: the verdict is on the data
	// so far and the run's end may change it.
	Provisional bool `json:"provisional"`
	// Verdict is pass, fail or error when judged on the data so far (the
	// window clipped to now; for a stream's latency, errors, throughput,
	// shedding or isolation, to the seconds already closed); "pending"
	// when the window has not started, none of its seconds has closed
	// yet, or the assertion's kind is judged only when the run ends
	// ([scenario.LiveAtEnd]: recovery).
	Verdict string `json:"verdict"`
	Figure  string `json:"figure,omitempty"`
	Bound   string `json:"bound,omitempty"`
	Message string `json:"message"`
	// Through is, for an assertion judged on a stream's seconds, the end
	// of the last second judged on the run's clock (nanoseconds in JSON;
	// 0 otherwise). A second closes its stream's timeout plus 2 s after
	// it ends, so Through trails the clock by that much.
	Through time.Duration `json:"through,omitempty"`
}

// Provisional judges the assertions on the data so far: those the event
// log decides on the events so far, those over a stream's seconds on the
// seconds closed so far, each in its window as it really is now (moved
// where operators started, ended or held faults) and clipped to now.
// These verdicts may change: only the run's end judges.
func (c *Control) Provisional() []Provisional {
	r := c.run
	now := r.Clock.Now()
	events := r.Events.Events()
	live := livePlan(r.Scenario, r.Plan, events)
	p := *live
	p.Windows = make([]plan.Window, len(live.Windows))
	for i, w := range live.Windows {
		w.End = min(w.End, now)
		p.Windows[i] = w
	}
	var judge []scenario.Assertion
	var judgeAt []int
	out := make([]Provisional, len(r.Scenario.Assertions))
	for i, a := range r.Scenario.Assertions {
		win := a.Window
		if win == "" {
			win = scenario.DefaultWindow
		}
		out[i] = Provisional{Name: a.ResolvedName(), Type: string(a.Type), Window: win, Verdict: "pending", Provisional: true}
		w, err := assert.ResolveWindow(live, win)
		switch {
		case err == nil && w.Start >= now:
			out[i].Message = "window not started"
		case liveJudging(a.Type) == scenario.LiveOnSeconds:
			r.Windows.judge(live, a, win, &out[i])
		case liveJudging(a.Type) == scenario.LiveOnEvents:
			judge = append(judge, a)
			judgeAt = append(judgeAt, i)
		default:
			out[i].Message = "judged when the run ends"
		}
	}
	for j, rr := range assert.Judge(&p, judge, events, nil) {
		o := &out[judgeAt[j]]
		o.Verdict, o.Figure, o.Bound, o.Message = string(rr.Verdict), rr.Figure.Text, rr.Bound, rr.Message
	}
	return out
}

// livePlan is p with the windows of the faults operators touched (and the
// manual ones) where events put them so far.
func livePlan(sc *scenario.Scenario, p *plan.Plan, events []event.Event) *plan.Plan {
	lp := *p
	lp.Windows = slices.Clone(p.Windows)
	lp.Actions = slices.Clone(p.Actions)
	lp.FollowOperators(sc.Faults, events, sc.Timeline.Recovery.D())
	return &lp
}

// windowKey names one running aggregate: a stream over a window.
type windowKey struct{ stream, window string }

// windowAgg is one stream's closed seconds merged over one window.
type windowAgg struct {
	// bounds is the window the seconds were merged for.
	bounds plan.Window
	// b holds the merged seconds (nil: none yet); from and to are the
	// span they cover.
	b        *measure.Bucket
	from, to time.Duration
	// moved is set when the window moved after seconds were merged
	// (an operator started or ended its fault late): the aggregate no
	// longer matches it and the run's end judges it.
	moved bool
}

// Windows keeps, for the console, each window-judged assertion's stream
// merged over its window as the engine closes seconds: one dense bucket
// per stream and window, so its memory does not grow with the run. The
// window bounds follow the live plan (fault on and off events and
// operator commands re-resolve them long before the seconds they touch
// close). Safe for concurrent use; a nil *Windows keeps nothing.
type Windows struct {
	mu   sync.Mutex
	aggs map[windowKey]*windowAgg
}

// NewWindows returns the aggregates the assertions of sc need, with their
// windows resolved in p as events (the run's so far) put them; nil when
// no assertion needs one.
func NewWindows(sc *scenario.Scenario, p *plan.Plan, events []event.Event) *Windows {
	return newWindows(sc, livePlan(sc, p, events))
}

// newWindows returns the aggregates the assertions of sc need, with
// their windows resolved in p (nil when none needs one).
func newWindows(sc *scenario.Scenario, p *plan.Plan) *Windows {
	lw := &Windows{aggs: map[windowKey]*windowAgg{}}
	for _, a := range sc.Assertions {
		if liveJudging(a.Type) != scenario.LiveOnSeconds || a.Stream == "" {
			continue
		}
		win := a.Window
		if win == "" {
			win = scenario.DefaultWindow
		}
		lw.aggs[windowKey{a.Stream, win}] = &windowAgg{}
		if a.Type == scenario.AssertIsolation {
			lw.aggs[windowKey{a.Stream, "baseline"}] = &windowAgg{}
		}
	}
	if len(lw.aggs) == 0 {
		return nil
	}
	lw.replan(p)
	return lw
}

// replan re-resolves every aggregate's window in p. An aggregate whose
// window moved after it took seconds (its start moved, or its end moved
// before a second it holds) is marked moved.
func (lw *Windows) replan(p *plan.Plan) {
	if lw == nil {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for k, agg := range lw.aggs {
		w, err := assert.ResolveWindow(p, k.window)
		if err != nil {
			w = plan.Window{Name: k.window} // an empty window takes nothing
		}
		if agg.b != nil && (w.Start != agg.bounds.Start || w.End < agg.to) {
			agg.moved = true
		}
		agg.bounds = w
	}
}

// Add merges a closed second of stream into the aggregates whose window
// holds it wholly (the engine's closer calls it once per stream second,
// and again for late results of a second already closed); it keeps no
// reference to b.
func (lw *Windows) Add(stream string, b *measure.Bucket) {
	if lw == nil {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for k, agg := range lw.aggs {
		if k.stream != stream || agg.moved || !b.Within(agg.bounds.Start, agg.bounds.End) {
			continue
		}
		if agg.b == nil {
			agg.b = measure.NewBucket(b.Start, b.Width)
			agg.from, agg.to = b.Start, b.Start+b.Width
		}
		agg.b.Merge(b)
		agg.from, agg.to = min(agg.from, b.Start), max(agg.to, b.Start+b.Width)
		agg.b.Start, agg.b.Width = agg.from, agg.to-agg.from
	}
}

// follow re-resolves the windows in p on every fault and operator event
// of evlog until ctx ends (a window moves only on those).
func (lw *Windows) follow(ctx context.Context, sc *scenario.Scenario, p *plan.Plan, evlog *event.Log) {
	if lw == nil {
		return
	}
	ch := make(chan event.Event, 1024)
	evlog.Follow(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ch:
			if e.Kind == event.FaultOn || e.Kind == event.FaultOff || e.Kind == event.Operator {
				lw.replan(livePlan(sc, p, evlog.Events()))
			}
		}
	}
}

// judge sets o to a's verdict on the seconds merged so far, its window
// (and baseline) resolved in live and cut to the seconds it holds.
func (lw *Windows) judge(live *plan.Plan, a scenario.Assertion, win string, o *Provisional) {
	if lw == nil {
		o.Message = "judged on the measured seconds when the run ends"
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	keys := []windowKey{{a.Stream, win}}
	if a.Type == scenario.AssertIsolation {
		keys = append(keys, windowKey{a.Stream, "baseline"})
	}
	var buckets []*measure.Bucket
	cut := map[string]time.Duration{}
	for _, k := range keys {
		agg := lw.aggs[k]
		switch {
		case agg == nil:
			o.Message = "judged on the measured seconds when the run ends"
			return
		case agg.moved:
			o.Message = fmt.Sprintf("window %s moved after its first seconds were measured (a fault started or ended by hand): judged when the run ends", k.window)
			return
		case agg.b == nil:
			o.Message = fmt.Sprintf("no second of window %s has closed yet (a second closes the stream's timeout + 2 s after it ends)", k.window)
			return
		}
		buckets = append(buckets, agg.b)
		cut[k.window] = agg.to
	}
	if len(buckets) == 2 {
		// The window and the baseline side by side in one series: each
		// must lie outside the other.
		x, y := buckets[0], buckets[1]
		if x.Start > y.Start {
			x, y = y, x
		}
		if x.Start+x.Width > y.Start {
			o.Message = "the window overlaps the baseline: judged when the run ends"
			return
		}
		buckets = []*measure.Bucket{x, y}
	}
	p := *live
	p.Windows = slices.Clone(live.Windows)
	for i := range p.Windows {
		w := &p.Windows[i]
		end, ok := cut[w.Name]
		if !ok {
			end = cut[win]
		}
		w.End = max(w.Start, min(w.End, end))
	}
	res := assert.Judge(&p, []scenario.Assertion{a}, nil, map[string]*measure.Series{a.Stream: {Stream: a.Stream, Buckets: buckets}})
	rr := res[0]
	o.Verdict, o.Figure, o.Bound, o.Message, o.Through = string(rr.Verdict), rr.Figure.Text, rr.Bound, rr.Message, cut[win]
}
