package main

import (
	"bytes"
	"context"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite the run.json fixtures and the golden table under testdata/")

// naiveFails are the assertions the naive fixture runs fail on, which
// their plans declare (expect.fail).
var naiveFails = []string{"auth-p99-during-brownout", "auth-errors", "tax-shed-fast", "no-restarts", "auth-isolation"}

// fixtureRuns are the runs under testdata/runs: a correct drill right
// twice, once INVALID (generator behind: 3% of requests late in one
// second) and once wrong (exit 1); its naive twin right twice (exactly
// the declared assertions failed), once wrong although it exited 1 (it
// failed one assertion besides the declared ones), once wrong because a
// declared assertion passed, and once aborted (exit 3).
func fixtureRuns() map[string]*record.Run {
	right := func(naive bool) *record.Run {
		rec := recordtest.Run(recordtest.Options{Naive: naive, Scale: 100})
		// The synthetic plan judges nothing: one judgement per result,
		// the naive build's declaring what it must fail on.
		for _, res := range rec.Results {
			rec.Plan.Judgements = append(rec.Plan.Judgements, plan.Judgement{Assertion: res.Name, Type: string(res.Type), Window: res.Window,
				ExpectFail: naive && slices.Contains(naiveFails, res.Name)})
		}
		return rec
	}
	// setVerdict sets the verdict of the assertion name in rec.
	setVerdict := func(rec *record.Run, name string, v assert.Verdict) *record.Run {
		for i := range rec.Results {
			if rec.Results[i].Name == name {
				rec.Results[i].Verdict = v
			}
		}
		return rec
	}
	failsBesides := setVerdict(right(true), "replicas-ready", assert.Fail)
	passesDeclared := setVerdict(right(true), "no-restarts", assert.Pass)
	invalid := right(false)
	for _, b := range invalid.Series["card-auth"].Buckets {
		if b.Start == 25*time.Second {
			b.Late = 42
			for range 20 {
				b.Lag.Record(18 * time.Millisecond)
			}
		}
	}
	invalid.Validity.LoadBehind = record.CheckLag(invalid.Scenario, invalid.Series, invalid.Plan.Warmup, invalid.Plan.Duration)
	invalid.ExitCode, _ = invalid.Decide()
	wrong := right(false)
	wrong.ExitCode = record.ExitFail
	// The correct drill's runs sampled the CPU from t=20 s to t=30 s:
	// drill used 1.2 s and its threads waited 0.8 s for a CPU (3 s in the
	// invalid run). Its naive twin's runs have no cpu record.
	for rec, wait := range map[*record.Run]float64{invalid: 3, wrong: 0.8} {
		rec.CPU = sampledCPU(wait)
	}
	aborted := right(true)
	aborted.Aborted = "run interrupted at t+30s: interrupt"
	aborted.ExitCode, _ = aborted.Decide()
	one, three := right(false), right(false)
	one.CPU, three.CPU = sampledCPU(0.6), sampledCPU(1)
	return map[string]*record.Run{
		"payment-tax-brownout/run-1":       one,
		"payment-tax-brownout/run-2":       invalid,
		"payment-tax-brownout/run-3":       three,
		"payment-tax-brownout/run-4":       wrong,
		"payment-tax-brownout-naive/run-1": right(true),
		"payment-tax-brownout-naive/run-2": aborted,
		"payment-tax-brownout-naive/run-3": right(true),
		"payment-tax-brownout-naive/run-4": failsBesides,
		"payment-tax-brownout-naive/run-5": passesDeclared,
	}
}

// sampledCPU is a cpu record over t=20-30 s of a 2-core machine: drill
// used 1.2 s and its threads waited wait seconds for a CPU.
func sampledCPU(wait float64) *cpuuse.Usage {
	u := &cpuuse.Usage{Cores: 2, From: 20 * time.Second, To: 30 * time.Second, CapacitySeconds: 20, BusySeconds: 10, Busy: 0.5,
		Parts:            []cpuuse.PartUsage{{Name: "drill", Kind: cpuuse.KindDrill, Seconds: 1.2, Share: 0.06}},
		DrillWaitSeconds: &wait}
	for at := 20 * time.Second; at < 30*time.Second; at += time.Second {
		u.Seconds = append(u.Seconds, cpuuse.Second{At: at, Busy: 0.5, Parts: []float64{0.06}, DrillWait: wait / 10})
	}
	return u
}

// TestTable tabulates the fixture runs (no drill is run) and compares the
// table with testdata/table.golden.txt.
func TestTable(t *testing.T) {
	dir := filepath.Join("testdata", "runs")
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for name, rec := range fixtureRuns() {
			// The table reads exit codes, validity, the plan's
			// declaration, verdicts and series only; ten seconds of
			// series keep the fixture small.
			rec.Events, rec.Findings = nil, nil
			for i := range rec.Results {
				rec.Results[i].Evidence = nil
			}
			for _, s := range rec.Series {
				s.Buckets = slices.DeleteFunc(s.Buckets, func(b *measure.Bucket) bool { return b.Start < 20*time.Second || b.Start >= 30*time.Second })
			}
			if err := rec.Save(filepath.Join(dir, name, "run.json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, err := readRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := tabulate(runs)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	// Drills in the order their runs were read (file names sorted).
	for _, c := range []struct {
		got, want row
	}{
		{rows[0], row{Drill: "payment-tax-brownout-naive", Expected: 1, Runs: 5, Valid: 5, Right: 2, Wrong: 2, Other: 1}},
		{rows[1], row{Drill: "payment-tax-brownout", Runs: 4, Valid: 3, Right: 2, Wrong: 1, Invalid: 1}},
	} {
		g, w := c.got, c.want
		if g.Drill != w.Drill || g.Expected != w.Expected || g.Runs != w.Runs || g.Valid != w.Valid || g.Right != w.Right ||
			g.Wrong != w.Wrong || g.Invalid != w.Invalid || g.Other != w.Other {
			t.Errorf("row %+v, want counts of %+v", g, w)
		}
	}
	if !slices.Equal(rows[0].Declared, naiveFails) {
		t.Errorf("the naive row declares %v, want %v", rows[0].Declared, naiveFails)
	}
	wantSets := map[string]int{
		strings.Join(naiveFails, ","): 2,
		"auth-p99-during-brownout,auth-errors,tax-shed-fast,no-restarts,auth-isolation,replicas-ready": 1,
		"auth-p99-during-brownout,auth-errors,tax-shed-fast,auth-isolation":                            1,
	}
	if !maps.Equal(rows[0].Failed, wantSets) {
		t.Errorf("the naive row's failed sets %v, want %v", rows[0].Failed, wantSets)
	}
	if rows[1].LateMax <= 0 || rows[1].LagMax < 10*time.Millisecond {
		t.Errorf("the invalid run's lag is missing: late max %.4f, lag p99 max %s", rows[1].LateMax, rows[1].LagMax)
	}
	var buf bytes.Buffer
	if err := writeTable(&buf, rows); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "table.golden.txt"), buf.Bytes(), *update)
}

func TestExpectedExit(t *testing.T) {
	for _, c := range []struct {
		drill string
		want  int
	}{
		{"orders-db-brownout", 0},
		{"orders-db-brownout-naive", 1},
		{"naive-orders", 0},
	} {
		if got := expectedExit(c.drill); got != c.want {
			t.Errorf("expectedExit(%q) = %d, want %d", c.drill, got, c.want)
		}
	}
}

// TestRunOnce runs a stand-in for bin/drill (a shell script that writes a
// fixture run.json into its --out directory and exits 4) and reads the
// run back; a second stand-in writes nothing and exits 3.
func TestRunOnce(t *testing.T) {
	dir := t.TempDir()
	fixture, err := filepath.Abs(filepath.Join("testdata", "runs", "payment-tax-brownout", "run-2", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	writes := filepath.Join(dir, "writes")
	// argv: run --out DIR FILE
	script := "#!/bin/sh\n[ \"$1 $2\" = \"run --out\" ] || exit 9\nmkdir -p \"$3\" && cp '" + fixture + "' \"$3/run.json\" && echo summary\nexit 4\n"
	if err := os.WriteFile(writes, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(dir, "silent")
	if err := os.WriteFile(silent, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := runOnce(context.Background(), writes, "scenarios/x.yaml", filepath.Join(dir, "x", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 4 || !res.Recorded || res.Valid || res.LagP99 < 10*time.Millisecond {
		t.Errorf("run with a record: %+v, want exit 4, recorded, invalid, lag p99 >= 10ms", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x", "run-1.log")); string(b) != "summary\n" {
		t.Errorf("run log %q, want the drill's output", b)
	}
	res, err = runOnce(context.Background(), silent, "scenarios/x.yaml", filepath.Join(dir, "x", "run-2"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 3 || res.Recorded {
		t.Errorf("run without a record: %+v, want exit 3, not recorded", res)
	}
	if _, err := runOnce(context.Background(), filepath.Join(dir, "missing"), "x.yaml", filepath.Join(dir, "x", "run-3")); err == nil {
		t.Error("a drill binary that does not exist is not an error")
	}
}

// TestDrillCPUPerRequest: drill's CPU over the sampled span divided by
// the requests every stream completed in it; the replicas' CPU does not
// count, and a run without a cpu record gives 0.
func TestDrillCPUPerRequest(t *testing.T) {
	series := map[string]*measure.Series{}
	for name, n := range map[string]int64{"orders": 1000, "tax": 100} {
		s := &measure.Series{Stream: name}
		for i := range 5 {
			b := measure.NewBucket(time.Duration(i)*time.Second, time.Second)
			b.Requests = n
			s.Buckets = append(s.Buckets, b)
		}
		series[name] = s
	}
	cpu := &cpuuse.Usage{
		Parts: []cpuuse.PartUsage{
			{Name: "drill", Kind: cpuuse.KindDrill, Seconds: 0.55},
			{Name: "order-gateway replicas", Kind: cpuuse.KindService, Seconds: 9},
		},
		// Sampled seconds 1, 2 and 3: 3 x 1,100 requests.
		Seconds: []cpuuse.Second{{At: time.Second}, {At: 2 * time.Second}, {At: 3 * time.Second}},
	}
	tests := []struct {
		name string
		cpu  *cpuuse.Usage
		want time.Duration
	}{
		{"drill part over the sampled seconds", cpu, 166666 * time.Nanosecond}, // 0.55 s / 3,300 requests
		{"no cpu record", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := drillCPUPerRequest(&record.Run{Series: series, CPU: tc.cpu})
			if got != tc.want {
				t.Errorf("drillCPUPerRequest = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestAppendRow: the first row of a new file comes after the header; each
// row names the build, the round, the guest and the getppid cost.
func TestAppendRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.tsv")
	m := machine{Guest: "PVM", Getppid: 812.4}
	r := runResult{Drill: "orders-db-brownout-naive", Exit: 1, LateShare: 0.0002, LagP99: 1100 * time.Microsecond, Recorded: true,
		Declared: []string{"no-restarts"}, Failed: []string{"no-restarts", "recovered-p99"}}
	at := time.Date(2026, 12, 6, 19, 30, 0, 0, time.UTC)
	for range 2 {
		if err := appendRow(path, "abc1234", "p1", m, r, at); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	row := "2026-12-06T19:30:00Z\tabc1234\tp1\torders-db-brownout-naive\t1\t0.0002\t1.1ms\tPVM\t812\t0\tno-restarts,recovered-p99"
	want := tsvHeader + "\n" + row + "\n" + row + "\n"
	if string(b) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", b, want)
	}
	if got := len(strings.Split(tsvHeader, "\t")); got != len(strings.Split(row, "\t")) {
		t.Fatalf("header has %d columns, a row %d", got, len(strings.Split(row, "\t")))
	}
}

// TestAppendRowUpgradesHeader: a file with the header of before the right
// and failed columns gets the new header; its rows stay as they were.
func TestAppendRowUpgradesHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.tsv")
	old := "ended_utc\tcommit\tround\tdrill\texit\tlate_share\tlag_p99\tguest\tgetppid_ns\n" +
		"2026-12-03T06:39:59Z\tbd691b1\t1\torders-db-brownout\t0\t0\t2.375ms\t\t\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runResult{Drill: "orders-db-brownout", Exit: 0, Recorded: true, AsDeclared: true}
	if err := appendRow(path, "abc1234", "p1", machine{Guest: "KVM"}, r, time.Date(2026, 12, 6, 19, 30, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := tsvHeader + "\n" + "2026-12-03T06:39:59Z\tbd691b1\t1\torders-db-brownout\t0\t0\t2.375ms\t\t\n" +
		"2026-12-06T19:30:00Z\tabc1234\tp1\torders-db-brownout\t0\t0\t0s\tKVM\t0\t1\t\n"
	if string(b) != want {
		t.Fatalf("file:\n%q\nwant:\n%q", b, want)
	}
}

// TestRight: a run is right only with the exit code of its declaration
// and exactly the declared assertions failed; a -naive run recorded
// without a declaration is judged by its exit code.
func TestRight(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    runResult
		want bool
	}{
		{"correct passes", runResult{Drill: "x", Exit: 0, Recorded: true, AsDeclared: true}, true},
		{"naive as declared", runResult{Drill: "x-naive", Exit: 1, Recorded: true, Declared: []string{"a"}, AsDeclared: true}, true},
		{"naive fails besides", runResult{Drill: "x-naive", Exit: 1, Recorded: true, Declared: []string{"a"}}, false},
		{"declared but passed", runResult{Drill: "x-naive", Exit: 0, Recorded: true, Declared: []string{"a"}}, false},
		{"undeclared naive, exit 1", runResult{Drill: "x-naive", Exit: 1, Recorded: true}, true},
		{"no record", runResult{Drill: "x-naive", Exit: 1}, false},
		{"invalid", runResult{Drill: "x", Exit: 4, Recorded: true, AsDeclared: true}, false},
	} {
		if got := tc.r.right(); got != tc.want {
			t.Errorf("%s: right() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
