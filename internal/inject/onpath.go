package inject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// ErrNotOnPath means traffic did not flow through a proxy a fault will use,
// so the fault would miss it and the drill would pass falsely. The runner
// maps it to exit code 4 (invalid measurement).
var ErrNotOnPath = errors.New("fault not on the traffic path")

// onPathSettle is how long CheckOnPath waits for counters that move only
// when connections close (remote Toxiproxy).
const onPathSettle = 2 * time.Second

// DefaultCanaryLatency is the latency (ms scale) of the canary toxic of
// [CheckOnPath] when [OnPathOptions].Latency is 0.
const DefaultCanaryLatency = 100 * time.Millisecond

// defaultCanaryRounds is how many drives are timed without and with the
// canary when [OnPathOptions].Rounds is 0.
const defaultCanaryRounds = 3

// Drive sends a few requests that make the system under test use the
// dependency behind a proxy, and returns how long they took: the median
// latency of one request or the total time of the drive (ms scale). The
// canary check of [CheckOnPath] only compares results of the same Drive with
// each other. An error means the traffic could not be driven.
type Drive func(ctx context.Context) (time.Duration, error)

// OnPathOptions configures the canary fallback of [CheckOnPath].
type OnPathOptions struct {
	// RunID names the canary toxic ([CanaryToxicName]); "" disables the
	// canary, so only the byte counters decide.
	RunID string
	// Journal records the canary toxic before it is added and its removal
	// after, so `drill cleanup` removes it after a SIGKILL; nil: not
	// journaled (tests).
	Journal *Journal
	// Latency is the canary's added latency on the downstream direction;
	// 0 means [DefaultCanaryLatency]. The drive's median must rise by at
	// least half of it.
	Latency time.Duration
	// Rounds is how many drives are timed without and with the canary;
	// 0 means 3.
	Rounds int
	// Log gets one line with the canary's measurements; nil discards.
	Log *slog.Logger
}

// CanaryToxicName is the name of the on-path canary toxic of run runID:
// drill-<run>-canary.
func CanaryToxicName(runID string) string { return RunPrefix(runID) + "canary" }

// CheckOnPath confirms that traffic flows through proxy while drive runs
// (docs/DESIGN.md §6, the on-path check).
//
// First the proxy's byte counters must move while drive runs. Embedded
// Toxiproxy counts bytes live; a remote Toxiproxy adds a connection's bytes
// only when it closes (and only with -proxy-metrics), so a service with
// long-lived pooled connections moves nothing. When the counters do not
// move or are unavailable, a canary decides: a latency toxic of
// opts.Latency named [CanaryToxicName] is added to the proxy's downstream
// direction, drive is timed opts.Rounds times without and with it, and the
// median must rise by at least half the canary latency. The canary is
// always removed before CheckOnPath returns (with a fresh bounded context
// if ctx ended), and journaled so `drill cleanup` removes it after a
// SIGKILL.
//
// Errors: [ErrNotOnPath] (exit 4) when neither the counters nor the canary
// show the traffic (or, with opts.RunID "", when the counters did not move);
// [ErrCountersUnavailable] only with opts.RunID "" and a server without
// counters; drive's error; an error adding or removing the canary.
func CheckOnPath(ctx context.Context, tp Toxiproxy, proxy string, drive Drive, opts OnPathOptions) error {
	moved, why, err := countersMove(ctx, tp, proxy, drive)
	switch {
	case err != nil:
		return err
	case moved:
		return nil
	case opts.RunID == "":
		if why.err != nil {
			return fmt.Errorf("check proxy %s is on the path: %w", proxy, why.err)
		}
		return fmt.Errorf("%w: %s", ErrNotOnPath, why.text)
	}
	base, with, err := canary(ctx, tp, proxy, drive, opts)
	if err != nil {
		return err
	}
	lat := opts.latency()
	opts.logger().Info("on-path canary", "proxy", proxy, "canary", lat,
		"median_without", base.Round(time.Microsecond), "median_with", with.Round(time.Microsecond), "counters", why.text)
	if with-base >= lat/2 {
		return nil
	}
	return fmt.Errorf("%w: %s, and a %s canary latency on proxy %s did not slow the traffic (median %s without, %s with; want a rise of at least %s)",
		ErrNotOnPath, why.text, lat, proxy, base.Round(time.Microsecond), with.Round(time.Microsecond), lat/2)
}

func (o OnPathOptions) latency() time.Duration {
	if o.Latency > 0 {
		return o.Latency
	}
	return DefaultCanaryLatency
}

func (o OnPathOptions) rounds() int {
	if o.Rounds > 0 {
		return o.Rounds
	}
	return defaultCanaryRounds
}

func (o OnPathOptions) logger() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// counterVerdict says why the counters did not prove the path: text for
// messages, err when they were unavailable.
type counterVerdict struct {
	text string
	err  error
}

// countersMove runs drive once and reports whether the proxy's byte
// counters moved. Counters unavailable is not an error here (why.err says
// so); other errors of the server or of drive are.
func countersMove(ctx context.Context, tp Toxiproxy, proxy string, drive Drive) (bool, counterVerdict, error) {
	before, cerr := tp.Counters(ctx, proxy)
	if cerr != nil && !errors.Is(cerr, ErrCountersUnavailable) {
		return false, counterVerdict{}, fmt.Errorf("check proxy %s is on the path: %w", proxy, cerr)
	}
	if _, err := drive(ctx); err != nil {
		return false, counterVerdict{}, fmt.Errorf("drive traffic to check proxy %s is on the path: %w", proxy, err)
	}
	if cerr != nil {
		return false, counterVerdict{text: "the server has no byte counters", err: cerr}, nil
	}
	deadline := time.Now().Add(onPathSettle)
	for {
		after, err := tp.Counters(ctx, proxy)
		if err != nil {
			return false, counterVerdict{}, fmt.Errorf("check proxy %s is on the path: %w", proxy, err)
		}
		if after.Total() > before.Total() {
			return true, counterVerdict{}, nil
		}
		if after.Live || time.Now().After(deadline) {
			text := fmt.Sprintf("no bytes passed proxy %s while driving traffic (total stayed %d bytes)", proxy, after.Total())
			if !after.Live {
				text += "; this Toxiproxy counts a connection's bytes when it closes"
			}
			return false, counterVerdict{text: text}, nil
		}
		select {
		case <-ctx.Done():
			return false, counterVerdict{}, fmt.Errorf("check proxy %s is on the path: %w", proxy, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// canary times drive without and with the canary toxic and returns the two
// medians. The toxic is removed on every path; an error removing it is
// returned (joined with any other).
func canary(ctx context.Context, tp Toxiproxy, proxy string, drive Drive, opts OnPathOptions) (base, with time.Duration, err error) {
	base, err = medianDrive(ctx, drive, opts.rounds())
	if err != nil {
		return 0, 0, fmt.Errorf("drive traffic without the canary on proxy %s: %w", proxy, err)
	}
	name := CanaryToxicName(opts.RunID)
	e := Entry{Op: OpApply, Key: "canary/" + proxy + "/" + name, Kind: KindToxic, Toxiproxy: tp.APIURL(),
		Embedded: isEmbedded(tp), Proxy: proxy, Toxic: name}
	if err := opts.Journal.Record(e); err != nil {
		return 0, 0, fmt.Errorf("journal canary toxic %s: %w", name, err)
	}
	remove := func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRevertTimeout)
		defer cancel()
		err := tp.RemoveToxic(rctx, proxy, name)
		if err != nil && !errors.Is(err, ErrToxicNotFound) && !errors.Is(err, ErrProxyNotFound) {
			return fmt.Errorf("remove canary toxic: %w", err)
		}
		e.Op = OpRevert
		return opts.Journal.Record(e)
	}
	// A failed add may still have reached the server (a timed-out call):
	// remove on every path from here.
	defer func() { err = errors.Join(err, remove()) }()
	ms := max(opts.latency().Round(time.Millisecond).Milliseconds(), 1)
	if err := tp.AddToxic(ctx, proxy, Toxic{Name: name, Type: "latency", Stream: "downstream", Toxicity: 1,
		Attributes: map[string]any{"latency": ms, "jitter": 0}}); err != nil {
		return 0, 0, fmt.Errorf("add canary toxic: %w", err)
	}
	with, err = medianDrive(ctx, drive, opts.rounds())
	if err != nil {
		return 0, 0, fmt.Errorf("drive traffic with the canary on proxy %s: %w", proxy, err)
	}
	return base, with, nil
}

// medianDrive runs drive n times and returns the median of its results.
func medianDrive(ctx context.Context, drive Drive, n int) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := drive(ctx)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
