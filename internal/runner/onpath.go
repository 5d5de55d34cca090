package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
)

// checkOnPath proves, before the drill proper, that traffic flows through
// every proxy a fault will use (exit 4 otherwise).
func (tl *timeline) checkOnPath(ctx context.Context) error {
	seen := map[string]bool{}
	for _, f := range tl.faults.specs() {
		if f.Proxy == "" || seen[f.Proxy] {
			continue
		}
		seen[f.Proxy] = true
		// Counters first; when they do not move (a remote Toxiproxy counts
		// pooled connections only at close) or are missing, a canary
		// latency toxic named drill-<run>-canary decides (docs/DESIGN.md §6).
		err := inject.CheckOnPath(ctx, tl.r.env.toxiproxy, f.Proxy, tl.timedWarmTraffic, inject.OnPathOptions{
			RunID: tl.r.id, Journal: tl.r.journal, Log: tl.r.log.With("component", "inject"),
		})
		if errors.Is(err, inject.ErrNotOnPath) {
			return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("fault %s would miss the traffic: %w", f.Name, err))
		}
		if err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("check that fault %s is on the traffic path: %w", f.Name, err))
		}
		tl.r.log.Info("fault is on the traffic path", "fault", f.Name, "proxy", f.Proxy)
	}
	return nil
}

// timedWarmTraffic is warmTraffic timed: the total time of its requests,
// which the on-path canary compares without and with its latency.
func (tl *timeline) timedWarmTraffic(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := tl.warmTraffic(ctx)
	return time.Since(start), err
}
