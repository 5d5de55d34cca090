package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/control"
)

// goLive hands the run's [control.Control] to Options.OnLive once the
// timeline runs (t=0); ctx is the timeline's, stopLoad and stopTimeline
// end the load and the timeline.
func (tl *timeline) goLive(ctx context.Context, stopLoad, stopTimeline context.CancelFunc) {
	r := tl.r
	if r.opts.OnLive == nil {
		return
	}
	c := control.Start(ctx, control.Run{
		Scenario: r.sc, Plan: r.plan, ID: r.id,
		Clock: r.clock, Events: r.evlog, Log: r.log, Redactor: r.redactor,
		Phase:    func(now time.Duration) string { return phaseAt(r.plan, now) },
		Faults:   consoleFaults{tl.faults},
		Streams:  tl.engine.Live,
		Services: r.liveServices,
		StopLoad: stopLoad,
		Abort: func(err error) {
			tl.abort(err)
			stopTimeline()
		},
		Windows: tl.live,
	})
	r.opts.OnLive(c)
}

// liveServices is each local service's replicas now (nil outside the
// local runtime).
func (r *run) liveServices() []control.ServiceLive {
	if r.env == nil {
		return nil
	}
	var out []control.ServiceLive
	for name, svc := range r.env.services {
		sl := control.ServiceLive{Name: name}
		for _, rs := range svc.Status() {
			sl.Replicas++
			if rs.Ready {
				sl.Ready++
			}
		}
		out = append(out, sl)
	}
	return out
}

// consoleFaults is the run's fault scheduler as the console commands it
// ([control.Faults]): each command goes through [faultScheduler.do], and
// one that does not apply wraps [control.ErrConflict].
type consoleFaults struct{ s *faultScheduler }

// Start implements [control.Faults].
func (f consoleFaults) Start(ctx context.Context, name, why string) error {
	return conflict(f.s.do(ctx, faultCommand{Kind: faultStart, Fault: name, Why: why}))
}

// End implements [control.Faults].
func (f consoleFaults) End(name, why string, scheduled bool) error {
	return conflict(f.s.do(context.Background(), faultCommand{Kind: faultEnd, Fault: name, Why: why, scheduled: scheduled}))
}

// Hold implements [control.Faults].
func (f consoleFaults) Hold(name, why string) error {
	return conflict(f.s.do(context.Background(), faultCommand{Kind: faultHold, Fault: name, Why: why}))
}

// Release implements [control.Faults].
func (f consoleFaults) Release(name, why string) error {
	return conflict(f.s.do(context.Background(), faultCommand{Kind: faultRelease, Fault: name, Why: why}))
}

// EndAll implements [control.Faults].
func (f consoleFaults) EndAll(why string) { f.s.endAll(why) }

// Status implements [control.Faults].
func (f consoleFaults) Status() []control.FaultStatus { return f.s.status() }

// conflict turns the scheduler's refusal into [control.ErrConflict];
// other errors (and nil) are returned as they are.
func conflict(err error) error {
	if errors.Is(err, errFaultCommand) {
		return fmt.Errorf("%w: %w", control.ErrConflict, err)
	}
	return err
}
