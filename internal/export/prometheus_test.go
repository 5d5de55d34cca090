package export

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/testutil/promtest"
)

// realRuns holds three recorded runs of the short orders drill.
const realRuns = "../../testdata/runs/orders-db-brownout-short"

// families are every metric family a run exports.
var families = []string{
	"drill_run_exit_code", "drill_run_valid", "drill_run_start_timestamp_seconds",
	"drill_assertion_passed", "drill_assertion_figure",
	"drill_stream_latency_seconds", "drill_stream_requests_per_second", "drill_stream_error_ratio", "drill_stream_shed_ratio",
	"drill_finding_seconds", "drill_finding_count",
}

// expected returns, per metric family, the series a Prometheus scraping
// the Pushgateway should hold for run pushed with grouping g, written as
// [promtest.Sample.String] writes them, sorted. The figures are read from
// the record itself (its results, its stream windows and findings as
// drill compare computes them), not from the exporter.
func expected(t *testing.T, run *record.Run, g Grouping) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(name string, v float64, kv ...string) {
		l := map[string]string{"__name__": name, "job": Job, "scenario": g.Scenario, "environment": g.Environment}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" { // Prometheus drops empty labels
				l[kv[i]] = kv[i+1]
			}
		}
		out[name] = append(out[name], promtest.Sample{Labels: l, Value: v}.String())
	}
	code, _ := run.Decide()
	add("drill_run_exit_code", float64(code))
	valid := 0.0
	if run.Validity.Valid() {
		valid = 1
	}
	add("drill_run_valid", valid)
	add("drill_run_start_timestamp_seconds", float64(run.StartedAt.UnixNano())/1e9)
	for _, r := range run.Results {
		passed := 0.0
		if r.Verdict == assert.Pass {
			passed = 1
		}
		add("drill_assertion_passed", passed, "assertion", r.Name, "window", r.Window, "type", string(r.Type))
		add("drill_assertion_figure", r.Figure.Value, "assertion", r.Name, "window", r.Window, "type", string(r.Type), "unit", r.Figure.Unit)
	}
	for _, w := range compare.StreamWindows(run) {
		s := w.Stats
		for _, q := range []struct {
			quantile string
			d        time.Duration
		}{{"0.5", s.P50}, {"0.9", s.P90}, {"0.99", s.P99}} {
			add("drill_stream_latency_seconds", q.d.Seconds(), "stream", w.Stream, "window", w.Window, "quantile", q.quantile)
		}
		add("drill_stream_requests_per_second", s.Rate, "stream", w.Stream, "window", w.Window)
		add("drill_stream_error_ratio", s.ErrorRate, "stream", w.Stream, "window", w.Window)
		shed := 0.0
		if s.Requests > 0 {
			shed = float64(s.Shed) / float64(s.Requests)
		}
		add("drill_stream_shed_ratio", shed, "stream", w.Stream, "window", w.Window)
	}
	for _, f := range compare.FindingFigures(run) {
		name := map[string]string{"s": "drill_finding_seconds", "count": "drill_finding_count"}[f.Unit]
		if name == "" {
			t.Fatalf("finding figure %+v in unit %q: the test knows s and count only", f, f.Unit)
		}
		add(name, f.Value, "finding", f.Kind, "subject", f.Subject, "figure", f.Figure)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// checkFamilies queries every family of the group g on Prometheus and
// compares it with want, series by series.
func checkFamilies(t *testing.T, promURL string, g Grouping, want map[string][]string) {
	t.Helper()
	for _, name := range families {
		q := fmt.Sprintf(`%s{job=%q,scenario=%q,environment=%q}`, name, Job, g.Scenario, g.Environment)
		got, err := promtest.Query(t.Context(), promURL, q)
		if err != nil {
			t.Fatal(err)
		}
		var gs []string
		for _, s := range got {
			delete(s.Labels, "instance") // the Pushgateway's empty instance, if any
			gs = append(gs, s.String())
		}
		slices.Sort(gs)
		if !slices.Equal(gs, want[name]) {
			t.Errorf("%s: Prometheus has\n  %v\nrun.json says\n  %v", q, gs, want[name])
		}
	}
}

// TestPrometheusRoundTrip: two recorded runs pushed to a real Pushgateway
// under two environments, scraped by a real Prometheus, read back with
// PromQL: every figure of each run.json comes back with its labels
// (scenario, environment, assertion, window, stream, quantile, finding);
// a third run pushed to the first group replaces it.
func TestPrometheusRoundTrip(t *testing.T) {
	t.Parallel()
	pg := promtest.Pushgateway(t)
	prom := promtest.StartPrometheus(t, promtest.Target{Job: "pushgateway", Addr: pg.URL, HonorLabels: true})
	load := func(night int) *record.Run {
		r, err := record.Load(filepath.Join(realRuns, fmt.Sprintf("night-%d", night), "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	runs := []struct {
		run *record.Run
		g   Grouping
	}{
		{load(1), Grouping{}},
		{load(2), Grouping{}},
	}
	runs[0].g = GroupingFor(runs[0].run, "staging")
	runs[1].g = GroupingFor(runs[1].run, "production")
	for _, r := range runs {
		if err := Push(t.Context(), pg.URL, nil, r.run, r.g); err != nil {
			t.Fatal(err)
		}
	}
	// startedIs waits until the group's start timestamp is run's: then
	// every series of that push has been scraped (one scrape holds all).
	startedIs := func(g Grouping, run *record.Run) {
		t.Helper()
		want := strconv.FormatFloat(float64(run.StartedAt.UnixNano())/1e9, 'g', -1, 64)
		q := fmt.Sprintf(`drill_run_start_timestamp_seconds{job=%q,scenario=%q,environment=%q}`, Job, g.Scenario, g.Environment)
		promtest.WaitQuery(t, prom.URL, q, 90*time.Second, func(s []promtest.Sample) error {
			if len(s) != 1 || strconv.FormatFloat(s[0].Value, 'g', -1, 64) != want {
				return fmt.Errorf("%w: %v, want one series at %s", promtest.ErrNotYet, s, want)
			}
			return nil
		})
	}
	for _, r := range runs {
		startedIs(r.g, r.run)
	}
	if runs[0].g.Scenario != "orders-db-brownout-short" {
		t.Fatalf("grouping %+v, want scenario orders-db-brownout-short", runs[0].g)
	}
	for _, r := range runs {
		want := expected(t, r.run, r.g)
		if len(want["drill_assertion_figure"]) < 5 || len(want["drill_stream_latency_seconds"]) < 6 || len(want["drill_finding_seconds"]) == 0 {
			t.Fatalf("fixture %s has too few figures to be a test: %v", r.run.RunID, want)
		}
		checkFamilies(t, prom.URL, r.g, want)
	}

	// Spot checks in PromQL terms a dashboard would use.
	q := `max by (environment) (drill_stream_latency_seconds{job="drill",scenario="orders-db-brownout-short",quantile="0.99",window="run"})`
	got, err := promtest.Query(t.Context(), prom.URL, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Labels["environment"] != "production" || got[1].Labels["environment"] != "staging" {
		t.Fatalf("%s = %v, want one series per environment", q, got)
	}
	for i, r := range []*record.Run{runs[1].run, runs[0].run} {
		var worst float64
		for _, w := range compare.StreamWindows(r) {
			if w.Window == "run" {
				worst = max(worst, w.Stats.P99.Seconds())
			}
		}
		if got[i].Value != worst || worst <= 0 {
			t.Errorf("%s: %s has %v, run.json's worst run-window p99 is %v s", q, got[i].Labels["environment"], got[i].Value, worst)
		}
	}

	// Night 3 replaces night 1 in the staging group.
	night3 := load(3)
	if err := Push(t.Context(), pg.URL, nil, night3, runs[0].g); err != nil {
		t.Fatal(err)
	}
	startedIs(runs[0].g, night3)
	checkFamilies(t, prom.URL, runs[0].g, expected(t, night3, runs[0].g))
	checkFamilies(t, prom.URL, runs[1].g, expected(t, runs[1].run, runs[1].g))
}
