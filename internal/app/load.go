package app

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/progress"
	"github.com/drillhq/drill/internal/runner"
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
	processStats   string
	progressEvery  time.Duration
	startMargin    time.Duration
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
services and proxies that ${...} references name; ${run.id}, ${env.NAME} and,
in kubernetes scenarios, ${services.NAME.url} are filled as drill run fills
them).
Without one, the flags describe a single stream:

  drill load --url http://127.0.0.1:8080/orders --rate 100/s --duration 10s

A kubernetes scenario with load.workers spreads its streams over that many
worker pods of one Indexed Job in the scenario's namespace (image
load.image), t=0 --start-margin (default 30 s) after the Job is created,
follows their logs and merges their seconds; a line per worker follows the
summary (its pod, requests sent and late, dispatch lag p99 and max, how late
it started).

Exit codes: 0 done, 2 bad input, 3 could not run, 4 the generator fell
behind its schedule beyond the lag budget or a load worker failed (the
figures cannot be trusted).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := runner.LoadOptions{Save: f.save, ProcessStats: f.processStats, ProgressEvery: f.progressEvery, Stdout: g.Stdout, Progress: g.Stderr, Logger: g.Logger, OnLate: g.onLate(),
				Workers: runner.WorkersOptions{Kubeconfig: g.Kubeconfig, Context: g.Context, Namespace: g.Namespace, StartMargin: f.startMargin}}
			if d, err := inject.DefaultStateDir(g.Getenv); err == nil {
				opts.Workers.StateDir = d
			}
			if file, ok := g.Stderr.(*os.File); ok {
				opts.ProgressTTY = progress.IsTerminal(file)
			}
			if len(args) == 1 {
				if len(f.urls) > 0 {
					return exitcode.Wrap(exitcode.BadInput, errors.New("drill load: give a scenario or --url, not both"))
				}
				s, err := loadScenario(args[0])
				if err != nil {
					return err
				}
				opts.Scenario = s
			} else {
				st, err := f.stream()
				if err != nil {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill load: %w", err))
				}
				opts.Streams = []scenario.Stream{st}
			}
			return runner.Load(cmd.Context(), opts)
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
	fl.DurationVar(&f.startMargin, "start-margin", runner.DefaultWorkersStartMargin, "load.workers: how long after the workers Job is created t=0 lies (time to schedule and start the pods)")
	fl.StringVar(&f.save, "save", "", "also write the per-second buckets as JSON to this file")
	fl.StringVar(&f.processStats, "process-stats", "", "write drill's own CPU and heap allocations over the load, with the requests sent, as JSON to this file (benchmarks)")
	_ = fl.MarkHidden("process-stats")
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
