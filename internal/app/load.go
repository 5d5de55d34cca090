package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/progress"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// loadFlags are drill load's flags.
type loadFlags struct {
	name           string
	urls           []string
	method         string
	headers        []string
	body           string
	rate           string
	duration       time.Duration
	timeout        time.Duration
	maxWorkers     int
	maxConnections int
	noKeepAlive    bool
	late           time.Duration
	lateFraction   float64
	save           string
	progressEvery  time.Duration
}

func newLoadCommand(g *Globals) *cobra.Command {
	f := &loadFlags{}
	cmd := &cobra.Command{
		Use:   "load [SCENARIO]",
		Short: "Drive load alone (no faults) and print a per-stream baseline",
		Long: `load drives open-model load at exact rates and prints, per stream, the
achieved rate and the latency percentiles (from each request's intended send
time, so a late generator cannot hide queueing) and the errors.

With a SCENARIO it runs the scenario's streams on their own timeline and
injects no fault; their URLs must be absolute (only "drill run" starts the
services and proxies that ${...} references name; ${run.id} is filled).
Without one, the flags describe a single stream:

  drill load --url http://127.0.0.1:8080/orders --rate 100/s --duration 10s

Exit codes: 0 done, 2 bad input, 3 could not run, 4 the generator fell
behind its schedule beyond the lag budget (the figures cannot be trusted).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (rerr error) {
			var streams []scenario.Stream
			dir := ""
			if len(args) == 1 {
				if len(f.urls) > 0 {
					return exitcode.Wrap(exitcode.BadInput, errors.New("drill load: give a scenario or --url, not both"))
				}
				s, err := loadScenario(args[0])
				if err != nil {
					return err
				}
				env := s.EnvVars(os.LookupEnv)
				secrets := make([]string, 0, len(env))
				for _, v := range env {
					secrets = append(secrets, v)
				}
				rd := s.Redactor(secrets...)
				g.Logger = slog.New(redact.Handler(g.Logger.Handler(), rd))
				if streams, err = scenarioStreams(s, env); err != nil {
					return redact.Error(exitcode.Wrap(exitcode.BadInput, err), rd)
				}
				defer func() { rerr = redact.Error(rerr, rd) }()
				if len(s.Faults) > 0 {
					g.Logger.Warn("drill load injects no faults; ignoring the scenario's", "faults", len(s.Faults))
				}
				dir = filepath.Dir(s.File)
			} else {
				st, err := f.stream()
				if err != nil {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill load: %w", err))
				}
				streams = []scenario.Stream{st}
			}
			return runLoad(cmd.Context(), g, streams, dir, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "load", "stream name (flag mode)")
	fl.StringArrayVar(&f.urls, "url", nil, "target URL, absolute http(s)://; repeat for round-robin targets")
	fl.StringVar(&f.method, "method", http.MethodGet, "HTTP method")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, `request header "Name: value"; repeatable`)
	fl.StringVar(&f.body, "body", "", "request body; a Go template with {{.ID}}, {{.Seq}}, {{.Time}}")
	fl.StringVar(&f.rate, "rate", "50/s", "request rate, e.g. 100/s, 1400/1s, 90/m")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long to send")
	fl.DurationVar(&f.timeout, "timeout", load.DefaultTimeout, "per-request timeout (whole exchange)")
	fl.IntVar(&f.maxWorkers, "max-workers", 0, "cap on concurrent requests (0: rate x timeout, capped)")
	fl.IntVar(&f.maxConnections, "max-connections", 0, "cap on connections per host (0: unlimited)")
	fl.BoolVar(&f.noKeepAlive, "no-keepalive", false, "open a new connection per request")
	fl.DurationVar(&f.late, "late", measure.DefaultLateAfter, "lag beyond which a request counts as sent late")
	fl.Float64Var(&f.lateFraction, "late-fraction", measure.DefaultLateFraction, "share of late requests (0..1) beyond which the run is invalid")
	fl.StringVar(&f.save, "save", "", "also write the per-second buckets as JSON to this file")
	fl.DurationVar(&f.progressEvery, "progress", 0, "progress period on stderr (default 1s on a terminal, 5s otherwise; negative: off)")
	return cmd
}

// stream builds the flag-mode stream.
func (f *loadFlags) stream() (scenario.Stream, error) {
	if len(f.urls) == 0 {
		return scenario.Stream{}, errors.New("give a SCENARIO or at least one --url")
	}
	r, err := scenario.ParseRate(f.rate)
	if err != nil {
		return scenario.Stream{}, fmt.Errorf("--rate: %w", err)
	}
	if r.Freq == 0 && f.maxWorkers <= 0 {
		return scenario.Stream{}, errors.New("--rate 0 (as fast as possible) needs --max-workers")
	}
	if f.duration <= 0 {
		return scenario.Stream{}, errors.New("--duration must be positive")
	}
	hdr := map[string]string{}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return scenario.Stream{}, fmt.Errorf("--header %q: write Name: value", h)
		}
		hdr[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	st := scenario.Stream{
		Name: f.name, Rate: &r,
		Duration:       scenario.Duration{Duration: f.duration},
		Timeout:        scenario.Duration{Duration: f.timeout},
		MaxWorkers:     f.maxWorkers,
		MaxConnections: f.maxConnections,
		LagBudget:      &scenario.LagBudget{Late: scenario.Duration{Duration: f.late}, Fraction: f.lateFraction},
	}
	if f.noKeepAlive {
		no := false
		st.KeepAlive = &no
	}
	for _, u := range f.urls {
		st.Targets = append(st.Targets, scenario.Target{Method: f.method, URL: u, Headers: hdr, Body: f.body})
	}
	return st, nil
}

// scenarioStreams returns the scenario's streams with ${run.id} and the
// ${env.NAME} values of env (scenario.EnvVars) filled; any other ${...}
// reference is refused (only drill run can fill it).
func scenarioStreams(s *scenario.Scenario, env map[string]string) ([]scenario.Stream, error) {
	if len(s.Streams) == 0 {
		return nil, fmt.Errorf("%s: the scenario has no streams", s.File)
	}
	vars := map[string]string{"run.id": fmt.Sprintf("load-%d", time.Now().Unix())}
	for k, v := range env {
		vars[k] = v
	}
	expand := func(where, v string) (string, error) {
		out, err := scenario.Expand(v, vars)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w; drill load cannot start the scenario's services or proxies: give absolute URLs or use drill run", s.File, where, err)
		}
		return out, nil
	}
	out := make([]scenario.Stream, len(s.Streams))
	for i, st := range s.Streams {
		st.Targets = append([]scenario.Target(nil), st.Targets...)
		for j := range st.Targets {
			t := &st.Targets[j]
			where := fmt.Sprintf("streams[%d].targets[%d]", i, j)
			var err error
			if t.URL, err = expand(where+".url", t.URL); err != nil {
				return nil, err
			}
			hdr := make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				if hdr[k], err = expand(where+".headers."+k, v); err != nil {
					return nil, err
				}
			}
			t.Headers = hdr
			if t.Body, err = expand(where+".body", t.Body); err != nil {
				return nil, err
			}
		}
		if st.BasicAuth != nil {
			ba := *st.BasicAuth
			var err error
			if ba.Username, err = expand(fmt.Sprintf("streams[%d].basicAuth.username", i), ba.Username); err != nil {
				return nil, err
			}
			if ba.Password, err = expand(fmt.Sprintf("streams[%d].basicAuth.password", i), ba.Password); err != nil {
				return nil, err
			}
			st.BasicAuth = &ba
		}
		out[i] = st
	}
	return out, nil
}

func runLoad(ctx context.Context, g *Globals, streams []scenario.Stream, dir string, f *loadFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	clock := event.NewClock()
	opts := load.Options{Dir: dir}
	// Without --save only each stream's total is printed: the engine hands
	// its closed seconds to a running total per stream, so memory stays
	// flat however long the load runs. --save writes every second, which
	// the engine then keeps (packed, a few KB each).
	totals := totalsSink{}
	if f.save == "" {
		opts.Seconds = totals
	}
	eng, err := load.New(clock, streams, opts, g.Logger)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill load: %w", err))
	}
	var total time.Duration
	for _, st := range streams {
		total = max(total, st.Start.D()+st.Duration.D())
	}
	pctx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	if f.progressEvery >= 0 {
		tty := false
		if file, ok := g.Stderr.(*os.File); ok {
			tty = progress.IsTerminal(file)
		}
		p := progress.New(g.Stderr, tty, f.progressEvery)
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
	var runErr error
	cpuuse.Do(ctx, cpuuse.PartGenerator, func(ctx context.Context) { runErr = eng.Run(ctx) })
	stopProgress()
	<-progressDone
	if runErr != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill load: %w", runErr))
	}
	series := eng.Series()
	if f.save == "" {
		series = totals.series()
	}
	printSummary(g.Stdout, streams, series)
	if f.save != "" {
		if err := saveSeries(f.save, series); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	if err := eng.Validity(); err != nil {
		return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("drill load: measurement invalid: %w", err))
	}
	if bad := record.CheckConnectionErrors(&scenario.Scenario{Streams: streams}, series, 0, total); len(bad) > 0 {
		v := record.Validity{ConnectionErrors: bad}
		return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("drill load: measurement invalid: %s", v.Summary()))
	}
	if ctx.Err() != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill load: interrupted: %w", context.Cause(ctx)))
	}
	return nil
}

// printSummary writes one line per stream: intended and achieved rate,
// latency percentiles from intended send times, errors, late sends.
func printSummary(w io.Writer, streams []scenario.Stream, series map[string]*measure.Series) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stream\trequests\tintended/s\tachieved/s\tp50\tp90\tp99\tmax\terrors\tlate\t")
	for _, st := range streams {
		s := series[st.Name]
		if s == nil {
			continue
		}
		b := s.Total()
		secs := st.Duration.D().Seconds()
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", st.Name, b.Requests,
			float64(b.Intended)/secs, float64(b.Requests)/secs,
			ms(b.Quantile(50)), ms(b.Quantile(90)), ms(b.Quantile(99)), ms(b.Max()), errSummary(b), b.Late)
	}
	tw.Flush()
}

func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// errSummary is "0", or the failure count with its breakdown, e.g.
// "12 (503:10 timeout:2)".
func errSummary(b *measure.Bucket) string {
	n := b.Failures()
	if n == 0 {
		return "0"
	}
	var parts []string
	for code, c := range b.Codes {
		if code >= 400 {
			parts = append(parts, fmt.Sprintf("%d:%d", code, c))
		}
	}
	for kind, c := range b.Errors {
		parts = append(parts, fmt.Sprintf("%s:%d", kind, c))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, " "))
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
