// Package export turns a run record's figures into Prometheus metrics
// (docs/DESIGN.md §14), so a team's dashboards and alerts see
// drills: pushed to a Pushgateway under a grouping key (job "drill",
// scenario, environment) with the client library's push package, or
// written in the OpenMetrics text format for node_exporter's textfile
// collector.
//
// Metrics (gauges; units in the names, seconds and ratios 0..1):
//
//	drill_run_exit_code                       the run's exit code (docs/DESIGN.md §11)
//	drill_run_valid                           1 when the measurement is valid, else 0
//	drill_run_start_timestamp_seconds         wall-clock start of load (Unix seconds)
//	drill_assertion_passed{assertion,window,type}            1 pass, 0 otherwise
//	drill_assertion_figure{assertion,window,type,unit}       the measured figure in its unit (ms, ratio, count, ...)
//	drill_stream_latency_seconds{stream,window,quantile}     p50, p90, p99 latency from the intended send time
//	drill_stream_requests_per_second{stream,window}          completed requests per second
//	drill_stream_error_ratio{stream,window}                  failed / completed requests
//	drill_stream_shed_ratio{stream,window}                   shed (503/429) / completed requests
//	drill_finding_seconds{finding,subject,figure}            a finding's time (-1: never / not recovered)
//	drill_finding_count{finding,subject,figure}              a finding's count (restarts)
package export

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/prometheus/common/expfmt"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/record"
)

// Job is the Pushgateway job drill pushes under.
const Job = "drill"

// Registry returns a new registry holding run's figures as gauges (see
// the package documentation for names and labels), each also carrying
// constLabels (may be nil). The exit code is the
// one the record calls for now ([record.Run.Decide]). It returns an error
// when a metric cannot be registered.
func Registry(run *record.Run, constLabels prometheus.Labels) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels}, labels)
		reg.MustRegister(g)
		return g
	}
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("register drill metrics: %v", r)
			}
		}()
		code, _ := run.Decide()
		gauge("drill_run_exit_code", "Exit code of the drill run (0 passed, 1 assertion failed, 3 could not run, 4 invalid, 5 cleanup unverified).").WithLabelValues().Set(float64(code))
		valid := 0.0
		if run.Validity.Valid() {
			valid = 1
		}
		gauge("drill_run_valid", "1 when the run's measurement is valid (load on schedule, faults on the path), else 0.").WithLabelValues().Set(valid)
		if !run.StartedAt.IsZero() {
			gauge("drill_run_start_timestamp_seconds", "Wall-clock time load started, Unix seconds.").WithLabelValues().Set(float64(run.StartedAt.UnixNano()) / 1e9)
		}

		passed := gauge("drill_assertion_passed", "1 when the assertion passed, else 0.", "assertion", "window", "type")
		figure := gauge("drill_assertion_figure", "The assertion's measured figure in the unit of its unit label.", "assertion", "window", "type", "unit")
		for _, r := range run.Results {
			p := 0.0
			if r.Verdict == assert.Pass {
				p = 1
			}
			passed.WithLabelValues(r.Name, r.Window, string(r.Type)).Set(p)
			figure.WithLabelValues(r.Name, r.Window, string(r.Type), r.Figure.Unit).Set(r.Figure.Value)
		}

		lat := gauge("drill_stream_latency_seconds", "Latency quantile of a stream over a window, from the intended send time, seconds.", "stream", "window", "quantile")
		rate := gauge("drill_stream_requests_per_second", "Completed requests per second of a stream over a window.", "stream", "window")
		errs := gauge("drill_stream_error_ratio", "Failed / completed requests of a stream over a window (0..1).", "stream", "window")
		shed := gauge("drill_stream_shed_ratio", "Shed (503/429) / completed requests of a stream over a window (0..1).", "stream", "window")
		for _, w := range compare.StreamWindows(run) {
			s := w.Stats
			lat.WithLabelValues(w.Stream, w.Window, "0.5").Set(s.P50.Seconds())
			lat.WithLabelValues(w.Stream, w.Window, "0.9").Set(s.P90.Seconds())
			lat.WithLabelValues(w.Stream, w.Window, "0.99").Set(s.P99.Seconds())
			rate.WithLabelValues(w.Stream, w.Window).Set(s.Rate)
			errs.WithLabelValues(w.Stream, w.Window).Set(s.ErrorRate)
			sh := 0.0
			if s.Requests > 0 {
				sh = float64(s.Shed) / float64(s.Requests)
			}
			shed.WithLabelValues(w.Stream, w.Window).Set(sh)
		}

		secs := gauge("drill_finding_seconds", "A finding's time in seconds (-1: never, not recovered).", "finding", "subject", "figure")
		counts := gauge("drill_finding_count", "A finding's count (restarts).", "finding", "subject", "figure")
		for _, f := range compare.FindingFigures(run) {
			switch f.Unit {
			case "s":
				secs.WithLabelValues(f.Kind, f.Subject, f.Figure).Set(f.Value)
			case "count":
				counts.WithLabelValues(f.Kind, f.Subject, f.Figure).Set(f.Value)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// Grouping is a Pushgateway grouping key besides the job.
type Grouping struct {
	// Scenario is the scenario's name; Environment where the drill ran
	// (e.g. "staging"; default the run's environment type).
	Scenario, Environment string
}

// GroupingFor returns the grouping of run: its scenario's name and env,
// or the run's environment type when env is empty ("unknown" when that
// is empty too).
func GroupingFor(run *record.Run, env string) Grouping {
	if env == "" {
		env = run.Environment.Type
	}
	if env == "" {
		env = "unknown"
	}
	name := run.Name()
	if name == "" {
		name = "unknown"
	}
	return Grouping{Scenario: name, Environment: env}
}

// Push replaces the group job="drill", scenario, environment on the
// Pushgateway at url with run's metrics (HTTP PUT), using client (nil:
// http.DefaultClient). It returns an error naming url when the metrics
// cannot be built or the Pushgateway cannot be reached or refuses them.
func Push(ctx context.Context, url string, client *http.Client, run *record.Run, g Grouping) error {
	reg, err := Registry(run, nil)
	if err != nil {
		return err
	}
	if client == nil {
		client = http.DefaultClient
	}
	p := push.New(url, Job).Gatherer(reg).Client(client).Grouping("scenario", g.Scenario).Grouping("environment", g.Environment)
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("push run %s to Pushgateway %s: %w", run.RunID, url, err)
	}
	return nil
}

// WriteOpenMetrics writes run's metrics to path in the OpenMetrics text
// format (ending "# EOF"), each with the labels scenario and environment
// of g, as node_exporter's textfile collector reads them. The file is
// written to a temporary name in its directory and renamed, so a scrape
// never sees half of it. It returns an error naming path.
func WriteOpenMetrics(path string, run *record.Run, g Grouping) error {
	reg, err := Registry(run, prometheus.Labels{"scenario": g.Scenario, "environment": g.Environment})
	if err != nil {
		return err
	}
	fams, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("gather drill metrics: %w", err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("encode %s: %w", mf.GetName(), err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			return fmt.Errorf("encode metrics: %w", err)
		}
	}
	return record.WriteFile(path, "metrics file", b.Bytes())
}
