package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
)

// TestLoadSummary: drill load's table has a line per stream with a
// series, rates over the stream's duration, latencies in milliseconds
// ("-" without any) and the errors broken down by status and kind; a
// worker's line says its state and, when it failed, why.
func TestLoadSummary(t *testing.T) {
	b := measure.NewBucket(0, 2*time.Second)
	for range 8 {
		b.Requests++
		b.OK++
		b.Codes[200]++
		b.Latency.Record(4 * time.Millisecond)
	}
	b.Requests += 3
	b.Codes[503] += 2
	b.Errors["timeout"]++
	b.Intended, b.Late = 12, 1
	streams := []scenario.Stream{
		{Name: "orders", Duration: scenario.Duration{Duration: 2 * time.Second}},
		{Name: "idle", Duration: scenario.Duration{Duration: time.Second}},
		{Name: "unmeasured", Duration: scenario.Duration{Duration: time.Second}},
	}
	series := map[string]*measure.Series{
		"orders": {Stream: "orders", Buckets: []*measure.Bucket{b}},
		"idle":   {Stream: "idle", Buckets: []*measure.Bucket{measure.NewBucket(0, time.Second)}},
	}
	var out bytes.Buffer
	if err := report.LoadSummary(&out, streams, series); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 || strings.Contains(out.String(), "unmeasured") {
		t.Fatalf("want a header and a line per stream with a series:\n%s", out.String())
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "stream requests intended/s achieved/s p50 p90 p99 max errors late" {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) != 12 || f[0] != "orders" || f[1] != "11" || f[2] != "6.0" || f[3] != "5.5" ||
		!strings.HasSuffix(f[4], "ms") || f[8] != "3" || f[9] != "(503:2" || f[10] != "timeout:1)" || f[11] != "1" {
		t.Errorf("orders line %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "idle 0 0.0 0.0 - - - - 0 0" {
		t.Errorf("idle line %q", lines[2])
	}

	out.Reset()
	res := workers.Result{Workers: []workers.WorkerReport{
		{Index: 0, Pod: "w-0", Done: true, Sent: 10},
		{Index: 1, Pod: "w-1", Failed: true, Error: "worker 1 (pod w-1): killed"},
		{Index: 2, Pod: "w-2"},
	}}
	if err := report.LoadWorkerLines(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"worker 0  done  pod w-0  sent 10", "worker 1  FAILED  pod w-1", "(worker 1 (pod w-1): killed)", "worker 2  stopped  pod w-2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("worker lines lack %q:\n%s", want, out.String())
		}
	}
}
