package report_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/history"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

func runs() map[string]*record.Run {
	bad := recordtest.Run(recordtest.Options{Naive: true, Scale: 10})
	invalid := recordtest.Run(recordtest.Options{Scale: 10})
	invalid.Validity.LoadBehind = []record.StreamLag{{Stream: "card-auth", Late: 400, Requests: 7700, Fraction: 0.052, Budget: 0.01, LateAfter: 10e6}}
	invalid.Cleanup = record.Cleanup{Leftovers: []record.Leftover{{Kind: "toxic", Name: "drill-a1b2c3-tax-brownout",
		Detail: "on proxy tax-api", Remove: "drill cleanup --run-id drill-20260101T120000Z-a1b2c3"}}}
	// Interrupted by a signal 10 s into the fault: the windows still
	// running then are aborted (not judged), the baseline is judged.
	cut := recordtest.Run(recordtest.Options{Scale: 10})
	for i, e := range cut.Events {
		if e.Kind == event.PhaseStart && e.Detail == assert.LoadEndDetail {
			cut.Events[i].At = recordtest.FaultOn + 10*time.Second
		}
	}
	cut.Aborted = "run interrupted at t+30s: interrupt"
	cut.Rejudge()
	// The generator fell behind on a saturated machine: the CPU line and
	// the verdict say what the machine was doing and what to try.
	slow := recordtest.Run(recordtest.Options{Scale: 10})
	slow.Validity.LoadBehind = []record.StreamLag{{Stream: "card-auth", Late: 300, Requests: 7700, Fraction: 0.039, Budget: 0.01,
		LateAfter: 10 * time.Millisecond, LagP99: 18 * time.Millisecond, WorstAt: 25 * time.Second, WorstLate: 120}}
	slow.CPU = saturatedCPU()
	return map[string]*record.Run{
		"invalid-cpu": slow,
		"correct":     recordtest.Run(recordtest.Options{Scale: 10}),
		"naive":       bad,
		"unclean":     invalid,
		"interrupted": cut,
	}
}

// saturatedCPU is a 2-core machine saturated over a 60 s run: drill 52 %,
// two payment-core replicas 40 %, postgres 6 %; the second t=25 s busiest,
// with drill's threads waiting 410 ms for a CPU in it (9.6 s in all).
func saturatedCPU() *cpuuse.Usage {
	wait := 9.6
	u := &cpuuse.Usage{
		DrillWaitSeconds: &wait,
		Cores:            2, To: 60 * time.Second, CapacitySeconds: 120, BusySeconds: 118.8, Busy: 0.99,
		Parts: []cpuuse.PartUsage{
			{Name: "drill", Kind: cpuuse.KindDrill, Seconds: 62.4, Share: 0.52, Note: "includes the embedded Toxiproxy and the HTTP stub tax-api"},
			{Name: "payment-core replicas", Kind: cpuuse.KindService, Seconds: 48, Share: 0.40, Processes: 2},
			{Name: "postgres", Kind: cpuuse.KindDependency, Seconds: 7.2, Share: 0.06, Processes: 1},
		},
	}
	for i := range 60 {
		sec := cpuuse.Second{At: time.Duration(i) * time.Second, Busy: 0.98, Parts: []float64{0.5, 0.42, 0.06}, DrillWait: 0.155}
		if i == 25 {
			sec = cpuuse.Second{At: 25 * time.Second, Busy: 1, Parts: []float64{0.61, 0.38, 0.01}, DrillWait: 0.41}
		}
		u.Seconds = append(u.Seconds, sec)
	}
	return u
}

func TestSummaryGolden(t *testing.T) {
	for name, run := range runs() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := report.Summary(&buf, run); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "summary-"+name+".golden.txt", buf.Bytes())
		})
	}
}

func TestJUnitGolden(t *testing.T) {
	for name, run := range runs() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := report.WriteJUnit(&buf, run); err != nil {
				t.Fatal(err)
			}
			// Well-formed XML with the expected counts.
			var doc struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
				Errors   int `xml:"errors,attr"`
			}
			if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("junit.xml is not well-formed: %v", err)
			}
			want := len(run.Results) + 2 // plus validity and cleanup
			if run.Aborted != "" {
				want++ // plus "run completed"
			}
			if len(run.Findings) > 0 {
				want++ // plus "findings"
			}
			if doc.Tests != want {
				t.Errorf("tests = %d, want %d", doc.Tests, want)
			}
			checkGolden(t, "junit-"+name+".golden.xml", buf.Bytes())
		})
	}
}

func TestWriteAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports", "payment-tax-brownout-20260101T120000Z")
	run := recordtest.Run(recordtest.Options{Naive: true, Scale: 10})
	if err := report.WriteAll(dir, run); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{report.RunFile, report.JUnitFile, report.HTMLFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"s3cr3t-token", "hunter2"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s contains the secret %q", f, secret)
			}
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, report.HTMLFile))
	imgs := regexp.MustCompile(`<img alt="([^"]+)" src="data:image/png;base64,[^"]{1000,}">`).FindAllSubmatch(html, -1)
	var titles []string
	for _, m := range imgs {
		titles = append(titles, string(m[1]))
	}
	want := []string{"Latency: card-auth", "Throughput: card-auth", "Latency: tax", "Throughput: tax", "Ready replicas",
		"Metric: bulkhead_active_workers", "Metric: bulkhead_rejections_total"}
	if strings.Join(titles, "|") != strings.Join(want, "|") {
		t.Errorf("plots = %v, want %v", titles, want)
	}
	for _, s := range []string{
		"VERDICT: FAIL (exit 1)", "auth-p99-during-brownout", "liveness probe failed", "received SIGTERM",
		`<tr class="k-container-restart">`, "fault:tax-brownout", "REDACTED",
	} {
		if !bytes.Contains(html, []byte(s)) {
			t.Errorf("report.html lacks %q", s)
		}
	}
	if bytes.Contains(html, []byte("http://")) || bytes.Contains(html, []byte("https://")) {
		t.Error("report.html loads something from the network; it must be self-contained")
	}
	loaded, err := record.Load(filepath.Join(dir, report.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if loaded.ExitCode != record.ExitFail {
		t.Errorf("run.json exit code %d, want 1", loaded.ExitCode)
	}
	// The history summary sits beside run.json, so drill history over
	// many nights never decodes whole records; it holds no secret either.
	sum, err := os.ReadFile(history.SummaryPath(filepath.Join(dir, report.RunFile)))
	if err != nil {
		t.Fatalf("no history summary beside run.json: %v", err)
	}
	for _, secret := range []string{"s3cr3t-token", "hunter2"} {
		if bytes.Contains(sum, []byte(secret)) {
			t.Errorf("the history summary contains the secret %q", secret)
		}
	}
	// It summarises exactly the run.json bytes written (history uses it
	// only while their hash matches).
	runJSON, err := os.ReadFile(filepath.Join(dir, report.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		RunSHA256 string `json:"runSha256"`
	}
	if err := json.Unmarshal(sum, &head); err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(runJSON); head.RunSHA256 != hex.EncodeToString(h[:]) {
		t.Errorf("the history summary names run.json hash %q, not that of the run.json written", head.RunSHA256)
	}
	nights, err := history.Load([]string{dir}, history.Options{})
	if err != nil || len(nights) != 1 {
		t.Fatalf("history.Load(report dir) = %d nights, %v; want 1", len(nights), err)
	}
}

func TestWriteAllReportsUnwritableDirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := report.WriteAll(filepath.Join(f, "sub"), recordtest.Run(recordtest.Options{Scale: 50}))
	if err == nil || !strings.Contains(err.Error(), "create report directory") {
		t.Errorf("WriteAll into a file: %v", err)
	}
}

// TestSummaryStartup: restarts, crash-loop back-offs and failed starts
// before load get a STARTUP line per service; a clean bring-up gets none.
func TestSummaryStartup(t *testing.T) {
	run := recordtest.Run(recordtest.Options{Scale: 10})
	var clean bytes.Buffer
	if err := report.Summary(&clean, run); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(clean.String(), "STARTUP") {
		t.Errorf("a clean bring-up has a STARTUP line:\n%s", clean.String())
	}
	s := time.Second
	run.Events = append(run.Events,
		event.Event{At: -9 * s, Kind: event.ContainerRestart, Service: "payment-core", Pod: "payment-core-0", RestartCount: 1,
			Reason: "container exited with code 1 (Error)"},
		event.Event{At: -9 * s, Kind: event.K8sEvent, Service: "payment-core", Pod: "payment-core-0", Reason: "BackOff"},
		event.Event{At: -7 * s, Kind: event.ContainerRestart, Service: "payment-core", Pod: "payment-core-0", RestartCount: 2},
		event.Event{At: -7 * s, Kind: event.K8sEvent, Service: "payment-core", Pod: "payment-core-0", Reason: "Failed"},
		event.Event{At: -6 * s, Kind: event.ContainerRestart, Service: "payment-core", Pod: "payment-core-1", RestartCount: 1},
		// After load started: not a startup restart.
		event.Event{At: 3 * s, Kind: event.ContainerRestart, Service: "payment-core", Pod: "payment-core-2", RestartCount: 1},
	)
	var buf bytes.Buffer
	if err := report.Summary(&buf, run); err != nil {
		t.Fatal(err)
	}
	want := "\nSTARTUP   payment-core: 3 restarts before load (payment-core-0: 2, payment-core-1: 1), " +
		"1 CrashLoopBackOff wait, 1 failed start; first: container exited with code 1 (Error)\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, buf.String())
	}
}

// TestWriteAllAbortedWindows: windows cut short by an abort read ABORTED
// in report.html and in run.json (verdict "aborted"), never PASS.
func TestWriteAllAbortedWindows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports", "interrupted")
	if err := report.WriteAll(dir, runs()["interrupted"]); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, report.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte(`<span class="v aborted">ABORTED</span>`)) || bytes.Contains(html, []byte(`<span class="v pass">`)) {
		t.Error("report.html does not mark the cut-short windows ABORTED (or shows a PASS)")
	}
	rec, err := record.Load(filepath.Join(dir, report.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Results {
		if r.Verdict != assert.Aborted {
			t.Errorf("run.json: %s verdict %q, want %q", r.Name, r.Verdict, assert.Aborted)
		}
	}
}

// TestHTMLLoadWorkers: a run whose load ran on worker pods shows each
// worker's account in report.html, as the summary's LOAD WORKERS table
// does, and a failed worker's error beside it; a run without workers has
// no such table.
func TestHTMLLoadWorkers(t *testing.T) {
	run := recordtest.Run(recordtest.Options{Scale: 10})
	var plain bytes.Buffer
	if err := report.WriteHTML(&plain, run); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte("<h2>Load workers</h2>")) {
		t.Error("report.html of a run without load workers has a load workers table")
	}
	run.LoadWorkers = []record.LoadWorker{
		{Index: 0, Pod: "drill-load-abc-0-x1", State: "done", Sent: 7500, Late: 2, LagP99: 1500 * time.Microsecond, LagMax: 4 * time.Millisecond, Clock: "-3.96ms ±4.48ms"},
		{Index: 1, Pod: "drill-load-abc-1-y2", State: "failed", Sent: 3100, Error: "worker 1 (pod drill-load-abc-1-y2) ended before its schedule: exit 137"},
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, s := range []string{
		"<h2>Load workers</h2>", "2 worker pods",
		`<td class="num">0</td><td>done</td><td>drill-load-abc-0-x1</td><td class="num">7500</td><td class="num">2</td>`,
		`<span class="bad">failed</span></td><td>drill-load-abc-1-y2</td><td class="num">3100</td>`,
		"-3.96ms ±4.48ms", `class="note">worker 1 (pod drill-load-abc-1-y2) ended before its schedule: exit 137</td>`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
}

// TestSummaryUnroutableAfterFault: an unroutable assertion that counts only
// the time after its fault ended says so in its bound, so the 1.95 s it
// judged does not read as the same figure as the longer interval the
// findings report for the whole outage.
func TestSummaryUnroutableAfterFault(t *testing.T) {
	run, err := record.Load("../../testdata/runs/orders-db-brownout-short/night-1/run.json")
	if err != nil {
		t.Fatal(err)
	}
	run.Rejudge()
	var buf bytes.Buffer
	if err := report.Summary(&buf, run); err != nil {
		t.Fatal(err)
	}
	want := "longest after pg-pause ended <= 5.00s"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("summary lacks the bound %q", want)
	}
	checkGolden(t, "summary-unroutable-after-fault.golden.txt", buf.Bytes())
}

// TestHTMLClaims: report.html lists the claims the run's assertions
// checked, each with its verdict and the assertions behind it, and marks
// a declared failure of a naive twin; a run whose assertions name no
// claim has no claims table.
func TestHTMLClaims(t *testing.T) {
	run := runs()["naive"]
	run.Plan.Judgements = append(run.Plan.Judgements, plan.Judgement{Assertion: "tax-shed-fast", ExpectFail: true})
	var b bytes.Buffer
	if err := report.WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, s := range []string{
		"<h2>Claims</h2>",
		`<tr class="fail"><td><span class="v fail">FAIL</span></td><td><b>INV-BH-02</b></td><td>auth-p99-during-brownout</td></tr>`,
		`<td><b>INV-BH-03</b></td><td>tax-shed-fast (failed as expect.fail declares)</td>`,
	} {
		if !strings.Contains(html, s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
	for i := range run.Results {
		run.Results[i].Source = ""
	}
	b.Reset()
	if err := report.WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<h2>Claims</h2>") {
		t.Error("report.html of a run whose assertions name no claim has a claims table")
	}
}
