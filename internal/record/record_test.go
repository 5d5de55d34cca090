package record_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/scenario"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, naive := range []bool{false, true} {
		run := recordtest.Run(recordtest.Options{Naive: naive, Scale: 10})
		path := filepath.Join(t.TempDir(), "sub", "run.json")
		if err := run.Save(path); err != nil {
			t.Fatal(err)
		}
		got, err := record.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		// The record is enough to re-judge: the same verdicts come back.
		before, _ := json.Marshal(run.Results)
		code := got.Rejudge()
		after, _ := json.Marshal(got.Results)
		if !bytes.Equal(before, after) {
			t.Errorf("naive=%v: re-judged results differ:\nsaved  %s\nloaded %s", naive, before, after)
		}
		if code != run.ExitCode {
			t.Errorf("naive=%v: exit code %d after load, %d before", naive, code, run.ExitCode)
		}
		// Series survive exactly (histograms included).
		for name, s := range run.Series {
			ls := got.Series[name]
			if ls == nil || len(ls.Buckets) != len(s.Buckets) {
				t.Fatalf("series %s lost buckets", name)
			}
			a, b := s.Window(0, time.Minute), ls.Window(0, time.Minute)
			if a.Requests != b.Requests || a.Latency.TotalCount() != b.Latency.TotalCount() ||
				measure.Quantile(a.Latency, 99) != measure.Quantile(b.Latency, 99) || a.Shed.TotalCount() != b.Shed.TotalCount() ||
				a.Codes[503] != b.Codes[503] || a.Errors[measure.ErrTimeout] != b.Errors[measure.ErrTimeout] {
				t.Errorf("series %s differs after round trip: %v vs %v", name, a, b)
			}
		}
		if len(got.Events) != len(run.Events) || got.Plan.Duration != run.Plan.Duration ||
			got.Scenario.Metadata.Name != "payment-tax-brownout" || got.Scenario.File != "scenarios/payment-tax-brownout.yaml" ||
			!got.StartedAt.Equal(run.StartedAt) || got.Scenario.Assertions[0].MaxLatency.D() != 120*time.Millisecond {
			t.Errorf("naive=%v: record fields lost in the round trip", naive)
		}
		// Saving what was loaded gives the same bytes.
		b1, _ := record.Marshal(run)
		b2, _ := record.Marshal(got)
		if !bytes.Equal(b1, b2) {
			t.Errorf("naive=%v: Marshal(Load(Save(run))) differs from Marshal(run)", naive)
		}
	}
}

func TestExpectedVerdicts(t *testing.T) {
	good := recordtest.Run(recordtest.Options{Scale: 10})
	if code, why := good.Decide(); code != record.ExitPass {
		for _, r := range good.Results {
			t.Logf("%s %s %s", r.Verdict, r.Name, r.Message)
		}
		t.Fatalf("correct synthetic run: exit %d (%s), want 0", code, why)
	}
	bad := recordtest.Run(recordtest.Options{Naive: true, Scale: 10})
	code, why := bad.Decide()
	if code != record.ExitFail || !strings.Contains(why, "auth-p99-during-brownout") || !strings.Contains(why, "no-restarts") {
		t.Fatalf("naive synthetic run: exit %d (%s), want 1 on auth p99 and restarts", code, why)
	}
}

func TestLoadRefusesOtherSchemas(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{`{"schemaVersion":"drill.dev/run/v2"}`, `schema "drill.dev/run/v2" is not supported by this drill (it reads "drill.dev/run/v1")`},
		{`{"runId":"x"}`, "not a drill run record: no schemaVersion"},
		{`[1,2`, "not a JSON run record"},
		{`{"schemaVersion":"drill.dev/run/v1","events":"nope"}`, "decode run record"},
	} {
		p := filepath.Join(dir, "run.json")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := record.Load(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s) = %v, want error containing %q", c.body, err, c.want)
		}
	}
	if _, err := record.Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "read run record") {
		t.Errorf("missing file: %v", err)
	}
}

func TestRedaction(t *testing.T) {
	run := recordtest.Run(recordtest.Options{Scale: 10})
	// LOG_LEVEL's "info" is no number, duration or boolean: the scenario
	// allows it by name to be recorded.
	run.Scenario.Redact.AllowEnv = []string{"LOG_LEVEL"}
	run.Results[0].Evidence = append(run.Results[0].Evidence, assert.Evidence{Detail: `request had "Authorization":"Basic dXNlcjpwYXNz"`})
	b, err := record.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cr3t-token", "hunter2", "dXNlcjpwYXNz"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("run.json contains the secret %q", secret)
		}
	}
	if !bytes.Contains(b, []byte(`"Authorization": "REDACTED"`)) || !bytes.Contains(b, []byte(`"LOG_LEVEL": "info"`)) {
		t.Error("run.json lacks the redacted header or kept too little")
	}
	if run.Scenario.Streams[0].Targets[0].Headers["Authorization"] != "Bearer s3cr3t-token" {
		t.Error("Redact changed the run it was given")
	}
	for in, want := range map[string]string{
		"Authorization: Bearer abc.def":        "Authorization: REDACTED",
		"authorization=xyz rest":               "authorization=REDACTED rest",
		`{"Authorization":"Basic Zm9v","a":1}`: `{"Authorization":"REDACTED","a":1}`,
		"map[Authorization:[Bearer tok]]":      "map[Authorization:[REDACTED]]",
		"Proxy-Authorization: Basic Zm9v":      "Proxy-Authorization: REDACTED",
		"no secrets here":                      "no secrets here",
	} {
		if got := record.RedactText(in); got != want {
			t.Errorf("RedactText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactionEveryRule: run.json holds none of the secrets the rules
// cover, wherever the run put them, and still re-judges to the same
// verdicts.
func TestRedactionEveryRule(t *testing.T) {
	run := recordtest.Run(recordtest.Options{Scale: 10})
	sc := *run.Scenario
	sc.Redact.Headers = []string{"X-Tenant-Key"}
	sc.Streams = append([]scenario.Stream(nil), sc.Streams...)
	st := &sc.Streams[0]
	st.BasicAuth = &scenario.BasicAuth{Username: "u", Password: "ba-secret-1"}
	st.Targets = []scenario.Target{{
		Method:  "POST",
		URL:     "http://u:userinfo-secret-2@h/x?token=query-secret-3&page=1",
		Headers: map[string]string{"Cookie": "sid=cookie-secret-4", "X-Tenant-Key": "tenant-secret-5", "Accept": "text/plain"},
		Body:    `{"password":"body-secret-6"}`,
	}}
	sc.Services = append([]scenario.Service(nil), sc.Services...)
	sc.Services[0].Env = map[string]string{"GITHUB_PAT": "pat-secret-7", "DATABASE_URL": "postgres://a:dsn-secret-8@db/x", "NOTE": "${env.NOTE_FROM_ENV}"}
	run.Scenario = &sc
	run.Secrets = []string{"env-secret-9"}
	run.Events = append(run.Events, event.Event{At: 0, Kind: event.Note, Source: "run", Detail: "upstream said env-secret-9 and GET http://h/x?token=query-secret-3"})
	run.Validity.Warnings = append(run.Validity.Warnings, "dial http://u:userinfo-secret-2@h: refused")
	b, err := record.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 9; i++ {
		if j := bytes.Index(b, []byte(fmt.Sprintf("-secret-%d", i))); j >= 0 {
			t.Errorf("run.json holds secret %d: ...%s...", i, b[max(0, j-60):j+10])
		}
	}
	for _, keep := range []string{`"Accept": "text/plain"`, "page=1", "${env.NOTE_FROM_ENV}", `"username": "u"`} {
		if !bytes.Contains(b, []byte(keep)) {
			t.Errorf("run.json lacks %s", keep)
		}
	}
	got, err := record.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(run.Results)
	if code := got.Rejudge(); code != run.ExitCode {
		t.Errorf("re-judged exit %d, want %d", code, run.ExitCode)
	}
	if after, _ := json.Marshal(got.Results); !bytes.Equal(before, after) {
		t.Errorf("re-judged results differ:\nbefore %s\nafter  %s", before, after)
	}
}

func TestDecidePrecedence(t *testing.T) {
	pass := assert.Result{Name: "a", Verdict: assert.Pass}
	fail := assert.Result{Name: "b", Verdict: assert.Fail}
	errd := assert.Result{Name: "c", Verdict: assert.Error, Message: "no data"}
	for _, c := range []struct {
		name string
		run  record.Run
		code int
		why  string
	}{
		{"all pass", record.Run{Cleanup: record.Cleanup{Verified: true}, Results: []assert.Result{pass}}, 0, "every assertion passed"},
		{"a failure", record.Run{Cleanup: record.Cleanup{Verified: true}, Results: []assert.Result{pass, fail}}, 1, "assertion failed: b"},
		{"cannot judge", record.Run{Cleanup: record.Cleanup{Verified: true}, Results: []assert.Result{fail, errd}}, 4, "assertion c could not be judged: no data"},
		{"load behind", record.Run{Cleanup: record.Cleanup{Verified: true}, Results: []assert.Result{pass},
			Validity: record.Validity{LoadBehind: []record.StreamLag{{Stream: "orders", Fraction: 0.2, Budget: 0.01, LateAfter: 10 * time.Millisecond}}}},
			4, "load generator behind schedule on stream orders (20.0% of requests later than 10.0ms, budget 1.00%)"},
		{"aborted", record.Run{Cleanup: record.Cleanup{Verified: true}, Aborted: "SIGTERM", Results: []assert.Result{fail}}, 3, "SIGTERM"},
		{"window cut short, run not aborted", record.Run{Cleanup: record.Cleanup{Verified: true}, Results: []assert.Result{pass,
			{Name: "d", Verdict: assert.Aborted, Message: "not judged: window run [t=5.000s, t=60.000s) was cut short: the run stopped at t=2.000s"}}},
			4, "assertion d was not judged: window run"},
		{"window cut short by a signal", record.Run{Cleanup: record.Cleanup{Verified: true}, Aborted: "SIGTERM",
			Results: []assert.Result{{Name: "d", Verdict: assert.Aborted}}}, 3, "SIGTERM"},
		{"cleanup first", record.Run{Aborted: "SIGTERM", Cleanup: record.Cleanup{Leftovers: []record.Leftover{{Kind: "toxic", Name: "drill-x-latency",
			Remove: "drill cleanup --run-id x"}}}}, 5, "toxic drill-x-latency may still be active; remove it with: drill cleanup --run-id x"},
	} {
		code, why := c.run.Decide()
		if code != c.code || !strings.Contains(why, c.why) {
			t.Errorf("%s: Decide() = %d %q, want %d containing %q", c.name, code, why, c.code, c.why)
		}
	}
}

func TestCheckLag(t *testing.T) {
	s := &measure.Series{Stream: "orders"}
	for i := 0; i < 10; i++ {
		b := measure.NewBucket(time.Duration(i)*time.Second, time.Second)
		b.Requests, b.Late = 100, 0
		if i >= 5 {
			b.Late = 5
		}
		s.Buckets = append(s.Buckets, b)
	}
	series := map[string]*measure.Series{"orders": s}
	if got := record.CheckLag(nil, series, 0, 5*time.Second); len(got) != 0 {
		t.Errorf("no late requests: %+v", got)
	}
	got := record.CheckLag(nil, series, 0, 10*time.Second)
	if len(got) != 1 || got[0].Late != 25 || got[0].Fraction != 0.025 || got[0].Budget != 0.01 {
		t.Errorf("default budget: %+v", got)
	}
	sc := &scenario.Scenario{Streams: []scenario.Stream{{Name: "orders", LagBudget: &scenario.LagBudget{Fraction: 0.05}}}}
	if got := record.CheckLag(sc, series, 0, 10*time.Second); len(got) != 0 {
		t.Errorf("5%% budget: %+v", got)
	}
}

// TestCheckConnectionErrors: only connection-level failures count (not
// HTTP error statuses, not timeouts of a connected request), over the
// given window only, against the stream's bound (default 0.5); a stream
// whose scenario expects them (maxConnectionErrors: 1) passes.
func TestCheckConnectionErrors(t *testing.T) {
	bucket := func(sec int, codes map[int]int64, errs map[string]int64) *measure.Bucket {
		b := measure.NewBucket(time.Duration(sec)*time.Second, time.Second)
		for c, n := range codes {
			b.Codes[c] = n
			b.Requests += n
		}
		for k, n := range errs {
			b.Errors[k] = n
			b.Requests += n
		}
		return b
	}
	series := func(bs ...*measure.Bucket) map[string]*measure.Series {
		return map[string]*measure.Series{"orders": {Stream: "orders", Buckets: bs}}
	}
	refusedAll := series(bucket(0, nil, map[string]int64{measure.ErrRefused: 100}), bucket(1, nil, map[string]int64{measure.ErrRefused: 100}))
	one := 1.0
	for _, c := range []struct {
		name   string
		sc     *scenario.Scenario
		series map[string]*measure.Series
		from   time.Duration
		want   string // "" = valid
	}{
		{"every request refused", nil, refusedAll, 0, "orders 200/200 1 bound 0.5 connection-refused=200"},
		{"expected by the scenario", &scenario.Scenario{Streams: []scenario.Stream{{Name: "orders", MaxConnectionErrors: &one}}}, refusedAll, 0, ""},
		{"HTTP 502 and 503 are answers", nil, series(bucket(0, map[int]int64{502: 60, 503: 40}, nil)), 0, ""},
		{"timeouts of connected requests are not connection errors", nil, series(bucket(0, nil, map[string]int64{measure.ErrTimeout: 100})), 0, ""},
		{"mixed kinds above the bound", nil, series(bucket(0, map[int]int64{200: 40}, map[string]int64{
			measure.ErrDialTimeout: 20, measure.ErrUnreachable: 20, measure.ErrReset: 20})), 0,
			"orders 60/100 0.6 bound 0.5 connection-reset=20 dial-timeout=20 unreachable=20"},
		{"exactly at the bound", nil, series(bucket(0, map[int]int64{200: 50}, map[string]int64{measure.ErrRefused: 50})), 0, ""},
		{"outside the window (warm-up) does not count", nil,
			series(bucket(0, nil, map[string]int64{measure.ErrRefused: 100}), bucket(1, map[int]int64{200: 100}, nil)), time.Second, ""},
	} {
		got := record.CheckConnectionErrors(c.sc, c.series, c.from, 2*time.Second)
		var s string
		for _, g := range got {
			kinds := []string{}
			for _, k := range []string{measure.ErrRefused, measure.ErrReset, measure.ErrDialTimeout, measure.ErrUnreachable} {
				if n := g.ByKind[k]; n > 0 {
					kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
				}
			}
			sort.Strings(kinds)
			s = fmt.Sprintf("%s %d/%d %g bound %g %s", g.Stream, g.Errors, g.Requests, g.Fraction, g.Bound, strings.Join(kinds, " "))
		}
		if s != c.want {
			t.Errorf("%s: got %q, want %q", c.name, s, c.want)
		}
		v := record.Validity{ConnectionErrors: got}
		if v.Valid() != (c.want == "") {
			t.Errorf("%s: Valid() = %v", c.name, v.Valid())
		}
	}
	v := record.Validity{ConnectionErrors: record.CheckConnectionErrors(nil, refusedAll, 0, 2*time.Second)}
	if want := "stream orders failed at connection level on 100.0% of its requests (200/200: connection-refused 200), above its bound of 50.0%"; !strings.Contains(v.Summary(), want) {
		t.Errorf("Summary() = %q, want it to contain %q", v.Summary(), want)
	}
}

// TestCheckLagWorstSecond: a stream beyond its budget names the second in
// which most of its late requests were due, and its dispatch lag p99.
func TestCheckLagWorstSecond(t *testing.T) {
	s := &measure.Series{Stream: "orders"}
	for i := 0; i < 10; i++ {
		b := measure.NewBucket(time.Duration(i)*time.Second, time.Second)
		b.Requests = 100
		for j := 0; j < 100; j++ {
			b.Lag.Record(time.Duration(500+100*i) * time.Microsecond)
		}
		switch i {
		case 3:
			b.Late = 4
		case 7:
			b.Late = 9
		case 9:
			b.Late = 20 // outside the judged span [0 s, 9 s)
		}
		s.Buckets = append(s.Buckets, b)
	}
	got := record.CheckLag(nil, map[string]*measure.Series{"orders": s}, 0, 9*time.Second)
	if len(got) != 1 {
		t.Fatalf("CheckLag = %+v, want one stream", got)
	}
	if got[0].WorstAt != 7*time.Second || got[0].WorstLate != 9 {
		t.Errorf("worst second t=%s with %d late, want t=7s with 9", got[0].WorstAt, got[0].WorstLate)
	}
	if p := got[0].LagP99; p < 1200*time.Microsecond || p > 1400*time.Microsecond {
		t.Errorf("lag p99 %s, want about 1.3ms (the slowest judged second's lag)", p)
	}
}

// TestInvalidNamesTheMachine: a run whose generator fell behind says in
// its verdict what the machine was doing (over the run and in the second
// most late requests were due) and what to try; a record without CPU
// figures keeps the old message.
func TestInvalidNamesTheMachine(t *testing.T) {
	usage := &cpuuse.Usage{
		Cores: 2, To: 10 * time.Second, CapacitySeconds: 20, BusySeconds: 19.6, Busy: 0.98,
		Parts: []cpuuse.PartUsage{
			{Name: "drill", Kind: cpuuse.KindDrill, Seconds: 10.4, Share: 0.52},
			{Name: "order-gateway replicas", Kind: cpuuse.KindService, Seconds: 8, Share: 0.40, Processes: 3},
			{Name: "postgres", Kind: cpuuse.KindDependency, Seconds: 1.2, Share: 0.06, Processes: 1},
		},
	}
	for i := range 10 {
		usage.Seconds = append(usage.Seconds, cpuuse.Second{At: time.Duration(i) * time.Second, Busy: 0.98, Parts: []float64{0.52, 0.40, 0.06}})
	}
	usage.Seconds[7] = cpuuse.Second{At: 7 * time.Second, Busy: 1, Parts: []float64{0.6, 0.39, 0.01}}
	lag := record.StreamLag{Stream: "orders", Late: 30, Requests: 1000, Fraction: 0.03, Budget: 0.01, LateAfter: 10 * time.Millisecond,
		LagP99: 18 * time.Millisecond, WorstAt: 7 * time.Second, WorstLate: 9}
	for _, c := range []struct {
		name      string
		cpu       *cpuuse.Usage
		want, not []string
	}{
		{"with CPU", usage, []string{
			"load generator behind schedule on stream orders (3.00% of requests later than 10.0ms, budget 1.00%, dispatch lag p99 18.0ms, most late requests due in t=7.0-8.0 s (9))",
			"the machine over the run: 2 cores saturated (98% busy) over 10.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 0%",
			"in t=7.0-8.0 s, where most late requests were due: 2 cores saturated (100% busy): drill 60%, order-gateway replicas 39%, postgres 1%",
			"to try: fewer replicas of order-gateway (3 now)",
			"a longer lagBudget only if the machine is known to be slow",
		}, nil},
		{"without CPU", nil, []string{"most late requests due in t=7.0-8.0 s (9))"}, []string{"the machine", "to try"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := record.Run{Cleanup: record.Cleanup{Verified: true}, Validity: record.Validity{LoadBehind: []record.StreamLag{lag}}, CPU: c.cpu}
			code, why := run.Decide()
			if code != record.ExitInvalid {
				t.Errorf("code %d, want %d", code, record.ExitInvalid)
			}
			for _, w := range c.want {
				if !strings.Contains(why, w) {
					t.Errorf("Decide() reason\n  %s\nlacks\n  %s", why, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(why, n) {
					t.Errorf("Decide() reason\n  %s\nholds %q", why, n)
				}
			}
		})
	}
}

// TestUnmarshalRefusesDamagedRecords: a record without its plan, or that is
// not a JSON object, is refused in words: no reader may judge it as empty.
func TestUnmarshalRefusesDamagedRecords(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no plan", `{"schemaVersion":"` + record.SchemaVersion + `","runId":"x"}`, "no plan"},
		{"a list", `[1,2]`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := record.Unmarshal([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestCheckLagMissed: requests intended and never sent count as late, so a
// generator that fell behind until its stream ended is invalid even when
// every request it did send went out on time, and the summary says so.
func TestCheckLagMissed(t *testing.T) {
	s := &measure.Series{Stream: "orders"}
	for i := 0; i < 10; i++ {
		b := measure.NewBucket(time.Duration(i)*time.Second, time.Second)
		b.Intended, b.Requests = 100, 100
		if i == 9 {
			b.Requests = 80 // 20 never sent
		}
		s.Buckets = append(s.Buckets, b)
	}
	got := record.CheckLag(nil, map[string]*measure.Series{"orders": s}, 0, 10*time.Second)
	if len(got) != 1 || got[0].Missed != 20 || got[0].Intended != 1000 || got[0].Late != 0 || got[0].Fraction != 0.02 {
		t.Fatalf("CheckLag = %+v, want orders with 20 of 1000 never sent (2%%)", got)
	}
	v := record.Validity{LoadBehind: got}
	if want := "2.00% of intended requests later than 10.0ms or never sent (20 of 1000 never sent), budget 1.00%"; !strings.Contains(v.Summary(), want) {
		t.Errorf("Summary() = %q, want it to contain %q", v.Summary(), want)
	}
	if got := record.CheckLag(nil, map[string]*measure.Series{"orders": s}, 0, 9*time.Second); len(got) != 0 {
		t.Errorf("every intended request sent on time: %+v", got)
	}
}
