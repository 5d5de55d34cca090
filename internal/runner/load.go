package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/progress"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
)

// LoadOptions configure [Load] (drill load).
type LoadOptions struct {
	// Scenario, when set, gives the streams: the scenario's own, on their
	// own timeline, with no fault injected (loaded, defaulted, validated).
	Scenario *scenario.Scenario
	// Streams are the streams to drive when Scenario is nil (absolute
	// URLs, no ${...}).
	Streams []scenario.Stream
	// Save, when set, is a file that receives every stream's per-second
	// buckets as JSON.
	Save string
	// ProcessStats, when set, is a file that receives drill's own
	// [ProcessStats] over the load, as JSON (benchmarks set it beside
	// run.json's cpu).
	ProcessStats string
	// ProgressEvery is the progress period (0: 1 s on a terminal, 5 s
	// otherwise; negative: no progress).
	ProgressEvery time.Duration
	// Stdout receives the per-stream summary; Progress the live progress.
	Stdout, Progress io.Writer
	// ProgressTTY updates progress in place when true.
	ProgressTTY bool
	// Logger receives structured logs (stderr).
	Logger *slog.Logger
	// Workers configure a scenario whose load.workers spreads its load over
	// worker pods.
	Workers WorkersOptions
	// OnLate: see Options.OnLate (local load only).
	OnLate func(stream string, at time.Duration)
}

// Load drives streams alone, with no fault (drill load): a scenario's
// streams (their ${run.id}, ${env.NAME} and, in kubernetes scenarios,
// ${services.NAME.url} references filled as drill run fills them, secrets
// redacted by the scenario's rules in logs and errors) or opts.Streams. It
// prints one summary line per stream to Stdout and judges the
// measurement. The error carries the exit code: 2 bad input (a stream
// that cannot be prepared, a reference only drill run can fill), 3 could
// not run or interrupted, 4 the generator fell behind its schedule
// (measure's lag rule) or the load did not reach a server; nil when the
// measurement is valid.
func Load(ctx context.Context, opts LoadOptions) (rerr error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	streams, dir := opts.Streams, ""
	if s := opts.Scenario; s != nil {
		runID := fmt.Sprintf("load-%d", time.Now().Unix())
		vars, secrets := startVars(s, runID, os.LookupEnv)
		rd := s.Redactor(secrets...)
		opts.Logger = slog.New(redact.Handler(opts.Logger.Handler(), rd))
		var err error
		if streams, err = scenarioStreams(s, vars); err != nil {
			return redact.Error(exitcode.Wrap(exitcode.BadInput, err), rd)
		}
		defer func() { rerr = redact.Error(rerr, rd) }()
		if len(s.Faults) > 0 {
			opts.Logger.Warn("drill load injects no faults; ignoring the scenario's", "faults", len(s.Faults))
		}
		dir = filepath.Dir(s.File)
		if s.Load != nil && s.Load.Workers > 0 {
			// The Job's run id is one drill cleanup --run takes (a-z, 0-9, '.').
			return runWorkersLoad(ctx, opts, s, strings.ReplaceAll(runID, "-", "."), streams)
		}
	}
	return runLoad(ctx, opts, streams, dir)
}

// scenarioStreams returns s's streams with their ${...} references
// expanded from vars (load.ExpandStreams); a reference only drill run can
// fill (a service, proxy or dependency it starts) is refused.
func scenarioStreams(s *scenario.Scenario, vars map[string]string) ([]scenario.Stream, error) {
	if len(s.Streams) == 0 {
		return nil, fmt.Errorf("%s: the scenario has no streams", s.File)
	}
	out, err := load.ExpandStreams(s.Streams, vars)
	var xe *load.ExpandError
	if errors.As(err, &xe) {
		return nil, fmt.Errorf("%s: %s: %w; drill load cannot start the scenario's services or proxies: give absolute URLs or use drill run", s.File, xe.Field, xe.Err)
	}
	return out, err
}

func runLoad(ctx context.Context, opts LoadOptions, streams []scenario.Stream, dir string) error {
	clock := event.NewClock()
	lopts := load.Options{Dir: dir, OnLate: opts.OnLate}
	// Without Save only each stream's total is printed: the engine hands
	// its closed seconds to a running total per stream, so memory stays
	// flat however long the load runs. Save writes every second, which
	// the engine then keeps (packed, a few KB each).
	totals := totalsSink{}
	if opts.Save == "" {
		lopts.Seconds = totals
	}
	eng, err := load.New(clock, streams, lopts, opts.Logger)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill load: %w", err))
	}
	var total time.Duration
	for _, st := range streams {
		total = max(total, st.Start.D()+st.Duration.D())
	}
	pctx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	if opts.ProgressEvery >= 0 {
		p := progress.New(opts.Progress, opts.ProgressTTY, opts.ProgressEvery)
		go func() {
			defer close(progressDone)
			p.Run(pctx, func() progress.Snapshot {
				return progress.Snapshot{Elapsed: clock.Now(), Total: total, Phase: "load", Streams: eng.Live(5 * time.Second)}
			})
		}()
	} else {
		close(progressDone)
	}
	clock.Rezero()
	before := cpuuse.ReadSelf()
	var runErr error
	cpuuse.Do(ctx, cpuuse.PartGenerator, func(ctx context.Context) { runErr = eng.Run(ctx) })
	used := cpuuse.ReadSelf().Since(before)
	span := clock.Now()
	stopProgress()
	<-progressDone
	if runErr != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill load: %w", runErr))
	}
	series := eng.Series()
	if opts.Save == "" {
		series = totals.series()
	}
	// The table is for a person; a failed write does not change the
	// measurement's verdict.
	_ = report.LoadSummary(opts.Stdout, streams, series)
	if opts.Save != "" {
		if err := saveSeries(opts.Save, series); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	if opts.ProcessStats != "" {
		if err := saveProcessStats(opts.ProcessStats, used, span, series); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	if err := eng.Validity(); err != nil {
		return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("drill load: measurement invalid: %w", err))
	}
	// Everything the streams recorded counts: a stream's seconds (or the
	// one total bucket without --save) may end past its duration, with the
	// requests still in flight then.
	judged := max(total, seriesEnd(series))
	v := record.Validity{
		ConnectionErrors: record.CheckConnectionErrors(&scenario.Scenario{Streams: streams}, series, 0, judged),
		Problems:         record.CheckGenerator(series, 0, judged, openFileLimit()),
	}
	if !v.Valid() {
		return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("drill load: measurement invalid: %s", v.Summary()))
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill load: interrupted: %w", context.Cause(ctx)))
	}
	return nil
}

func saveSeries(path string, series map[string]*measure.Series) error {
	data, err := json.Marshal(series)
	if err != nil {
		return fmt.Errorf("encode series: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write series: %w", err)
	}
	return nil
}

// ProcessStats is what drill's own process used over a `drill load`
// (--process-stats): the figures per request that a full drill's run.json
// (cpu: the drill part's seconds, drillAllocObjects, drillAllocBytes) is
// set beside.
type ProcessStats struct {
	// Self is the process's CPU (ns) and heap allocations from the start
	// of load to its end.
	Self cpuuse.Self `json:"self"`
	// Span is the load's duration (ns).
	Span time.Duration `json:"span"`
	// Requests is every request the streams sent.
	Requests int64 `json:"requests"`
}

func saveProcessStats(path string, used cpuuse.Self, span time.Duration, series map[string]*measure.Series) error {
	st := ProcessStats{Self: used, Span: span}
	for _, s := range series {
		if s == nil {
			continue
		}
		for _, b := range s.Buckets {
			st.Requests += b.Requests
		}
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode process stats: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write process stats: %w", err)
	}
	return nil
}

// seriesEnd is the end of the last bucket of any of series (0 when none
// has any).
func seriesEnd(series map[string]*measure.Series) time.Duration {
	var end time.Duration
	for _, s := range series {
		if s != nil {
			_, to := s.Span()
			end = max(end, to)
		}
	}
	return end
}

// totalsSink merges every closed second of each stream into one bucket
// (load.SecondSink). Called from one goroutine at a time.
type totalsSink map[string]*measure.Bucket

// WriteSecond merges b into stream's total; it never fails.
func (t totalsSink) WriteSecond(stream string, b *measure.Bucket) error {
	if t[stream] == nil {
		t[stream] = measure.NewBucket(b.Start, 0)
	}
	tot := t[stream]
	tot.Merge(b)
	tot.Width = b.Start + b.Width - tot.Start
	return nil
}

// series returns each stream's total as a one-bucket series.
func (t totalsSink) series() map[string]*measure.Series {
	out := make(map[string]*measure.Series, len(t))
	for name, b := range t {
		out[name] = &measure.Series{Stream: name, Buckets: []*measure.Bucket{b}}
	}
	return out
}
