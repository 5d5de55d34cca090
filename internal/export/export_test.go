package export

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/testutil/promtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// pushgateway starts Debian's prometheus-pushgateway on a free loopback
// port (no persistence) and returns its URL; the test skips when the
// binary is missing.
func pushgateway(t *testing.T) string {
	t.Helper()
	return promtest.Pushgateway(t).URL
}

// scrape reads the Pushgateway's /metrics as metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the gauge of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf, ok := fams[name]
	if !ok {
		t.Fatalf("no metric family %s", name)
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if match {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s with labels %v", name, want)
	return 0
}

// TestPushToPushgateway: a run's figures pushed to a real Pushgateway
// come back from its /metrics under the grouping key, with units in the
// names; a second push to the same group replaces the first.
func TestPushToPushgateway(t *testing.T) {
	t.Parallel()
	url := pushgateway(t)
	ctx := context.Background()
	good := recordtest.Run(recordtest.Options{Scale: 10})
	g := GroupingFor(good, "staging")
	if err := Push(ctx, url, nil, good, g); err != nil {
		t.Fatal(err)
	}
	key := map[string]string{"job": "drill", "scenario": "payment-tax-brownout", "environment": "staging"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range key {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	fams := scrape(t, url)
	if v := value(t, fams, "drill_run_exit_code", key); v != 0 {
		t.Errorf("drill_run_exit_code = %v, want 0", v)
	}
	if v := value(t, fams, "drill_run_valid", key); v != 1 {
		t.Errorf("drill_run_valid = %v, want 1", v)
	}
	if v := value(t, fams, "drill_assertion_passed", with(map[string]string{"assertion": "auth-p99-during-brownout", "window": "fault:tax-brownout"})); v != 1 {
		t.Errorf("drill_assertion_passed = %v, want 1", v)
	}
	p99 := value(t, fams, "drill_stream_latency_seconds", with(map[string]string{"stream": "card-auth", "window": "fault:tax-brownout", "quantile": "0.99"}))
	fig := value(t, fams, "drill_assertion_figure", with(map[string]string{"assertion": "auth-p99-during-brownout", "unit": "ms"}))
	if p99 <= 0 || fmt.Sprintf("%.4f", p99*1000) != fmt.Sprintf("%.4f", fig) {
		t.Errorf("p99 %v s and the assertion's figure %v ms disagree", p99, fig)
	}
	if v := value(t, fams, "drill_stream_shed_ratio", with(map[string]string{"stream": "tax", "window": "fault:tax-brownout"})); v != 1 {
		t.Errorf("tax shed ratio in the fault = %v, want 1", v)
	}
	if v := value(t, fams, "drill_finding_count", with(map[string]string{"finding": "restarts", "subject": "payment-core"})); v != 0 {
		t.Errorf("restarts = %v, want 0", v)
	}
	if v := value(t, fams, "drill_finding_seconds", with(map[string]string{"finding": "recovery", "subject": "card-auth after tax-brownout"})); v != 0 {
		t.Errorf("recovery = %v, want 0", v)
	}

	naive := recordtest.Run(recordtest.Options{Scale: 10, Naive: true})
	if err := Push(ctx, url, nil, naive, g); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, url)
	if v := value(t, fams, "drill_run_exit_code", key); v != 1 {
		t.Errorf("after the second push drill_run_exit_code = %v, want 1", v)
	}
	if v := value(t, fams, "drill_finding_count", with(map[string]string{"finding": "restarts", "subject": "payment-core"})); v != 1 {
		t.Errorf("after the second push restarts = %v, want 1", v)
	}
}

// TestPushUnreachable: a Pushgateway that is not there is an error naming
// its URL.
func TestPushUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	run := recordtest.Run(recordtest.Options{Scale: 10})
	err = Push(context.Background(), url, nil, run, GroupingFor(run, ""))
	if err == nil || !strings.Contains(err.Error(), "Pushgateway "+url) {
		t.Fatalf("error %v, want one naming %s", err, url)
	}
}

// TestOpenMetricsFile: the metrics file is OpenMetrics text (golden),
// ends with # EOF and carries the scenario and environment labels.
func TestOpenMetricsFile(t *testing.T) {
	t.Parallel()
	run := recordtest.Run(recordtest.Options{Scale: 10})
	path := filepath.Join(t.TempDir(), "drill.prom")
	if err := WriteOpenMetrics(path, run, GroupingFor(run, "")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(got), "# EOF\n") || !strings.Contains(string(got), `drill_run_exit_code{environment="local",scenario="payment-tax-brownout"} 0`) {
		t.Errorf("not OpenMetrics with the grouping labels:\n%s", got)
	}
	gp := filepath.Join("testdata", "payment-tax-brownout.om.txt")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(gp, got, 0o644)
	}
	want, err := os.ReadFile(gp)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("metrics file differs from %s (go test ./internal/export -update to accept):\n%s", gp, got)
	}
	if err := WriteOpenMetrics(filepath.Join(t.TempDir(), "no", "such", "dir", "x.prom"), run, GroupingFor(run, "")); err == nil || !strings.Contains(err.Error(), "x.prom") {
		t.Errorf("unwritable path: error %v, want one naming the file", err)
	}
}
