package scenario

import (
	"strings"
	"testing"
	"time"
)

const minimal = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: t
timeline:
  duration: 30s
  warmup: 5s
dependencies:
  - name: pg
    postgres: {}
proxies:
  - name: pg
    upstream: ${dependencies.pg.addr}
streams:
  - name: s
    targets:
      - url: http://${proxies.pg.addr}/
    rate: 10/s
`

func mustParse(t *testing.T, src string) *Scenario {
	t.Helper()
	s, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	s.SetDefaults()
	return s
}

func TestParsePositions(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal)
	for path, want := range map[string]Position{
		"timeline.duration":   {Line: 6, Column: 13},
		"proxies[0].upstream": {Line: 13, Column: 15},
		"streams[0].rate":     {Line: 18, Column: 11},
		"streams[0]":          {Line: 15, Column: 5},
	} {
		if got := s.Positions[path]; got != want {
			t.Errorf("Positions[%q] = %+v, want %+v", path, got, want)
		}
	}
	if p, ok := s.Position("streams[0].timeout"); !ok || p.Line != 15 {
		t.Errorf("Position of an unset key = %+v, %v; want its parent's", p, ok)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal+`faults:
  - name: f
    type: timeout
    proxy: pg
    at: 10s
    for: 5s
assertions:
  - type: latency
    stream: s
    maxLatency: 1s
  - type: recovery
    stream: s
    maxRate: 0.1
    within: 5s
`)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	st := s.Streams[0]
	if st.Duration.D() != 30*time.Second || st.Timeout.D() != 5*time.Second || !*st.KeepAlive ||
		st.LagBudget.Late.D() != 10*time.Millisecond || st.LagBudget.Fraction != 0.01 || st.Targets[0].Method != "GET" {
		t.Errorf("stream defaults: %+v", st)
	}
	f := s.Faults[0]
	if f.Stream != "downstream" || *f.Toxicity != 1 || f.Timeout == nil || f.Timeout.D() != 0 {
		t.Errorf("fault defaults: %+v", f)
	}
	if pg := s.Dependencies[0].Postgres; pg.Mode != PostgresAuto || pg.Database != "drill" || pg.MaxConnections != 300 {
		t.Errorf("postgres defaults: %+v", pg)
	}
	a := s.Assertions[0]
	if a.Window != "run" || a.Name != "latency-run" || *a.Percentile != 99 {
		t.Errorf("assertion defaults: %+v", a)
	}
	r := s.Assertions[1]
	if r.Fault != "f" || r.Hold.D() != 2*time.Second || r.Name != "recovery-run" {
		t.Errorf("recovery defaults: %+v", r)
	}
	if s.Timeline.Recovery.D() != 10*time.Second || s.Timeline.ReadyTimeout.D() != 120*time.Second || s.Environment.Type != EnvLocal {
		t.Errorf("timeline defaults: %+v", s.Timeline)
	}
}

func TestSpans(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal+`faults:
  - name: late
    type: down
    proxy: pg
    at: 25s
    for: 5s
  - name: early
    type: latency
    proxy: pg
    latency: 10ms
    at: 10s
    for: 5s
`)
	s.Timeline.Windows = []WindowSpec{{Name: "w", From: Duration{6 * time.Second}, To: Duration{8 * time.Second}}}
	var got []string
	for _, sp := range s.Spans() {
		got = append(got, sp.Name+"="+sp.From.String()+".."+sp.To.String())
	}
	want := "run=5s..30s baseline=5s..10s fault:early=10s..15s recovery:early=15s..25s fault:late=25s..30s w=6s..8s"
	if strings.Join(got, " ") != want {
		t.Errorf("spans:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"proxies.pg.addr": "127.0.0.1:5433", "run.id": "r1"}
	tests := []struct {
		in, want, err string
	}{
		{"postgres://u@${proxies.pg.addr}/db", "postgres://u@127.0.0.1:5433/db", ""},
		{"${run.id}-${ run.id }", "r1-r1", ""},
		{"cost $5 and $$PATH and $${x}", "cost $5 and $PATH and ${x}", ""},
		{"trailing $", "trailing $", ""},
		{"${proxies.nope.addr}", "", "no value for ${proxies.nope.addr}"},
		{"${proxies.pg.addr", "", "unterminated ${"},
		{"${}", "", "empty ${}"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	refs, err := Refs("a ${x.y.z} b $${no} ${run.id}")
	if err != nil || len(refs) != 2 || refs[0].Key != "x.y.z" || refs[1].Key != "run.id" || refs[0].Offset != 2 {
		t.Errorf("Refs = %+v, %v", refs, err)
	}
}

func TestSampleVarsCoverEveryReference(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal)
	vars := s.SampleVars()
	for _, k := range []string{"dependencies.pg.addr", "dependencies.pg.dsn", "proxies.pg.port", "run.id"} {
		if vars[k] == "" {
			t.Errorf("SampleVars lacks %s", k)
		}
	}
	if _, ok := vars["dependencies.pg.url"]; ok {
		t.Error("a postgres dependency has no url")
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	known := []string{"latency", "jitter", "timeout", "proxy"}
	for in, want := range map[string]string{"latncy": "latency", "Latency": "latency", "proxi": "proxy", "zzzzzz": "", "x": ""} {
		if got := closest(in, known); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseErrorsAreCollected(t *testing.T) {
	t.Parallel()
	src := strings.Replace(minimal, "rate: 10/s", "rate: 10\n    timeout: 5\n    maxWorkers: many", 1)
	_, err := Parse("t.yaml", []byte(src))
	errs := AsErrors(err)
	if errs == nil || len(errs.List) != 3 {
		t.Fatalf("want 3 errors at once, got %v", err)
	}
}

func TestJSONSchema(t *testing.T) {
	t.Parallel()
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"$schema": "https://json-schema.org/draft/2020-12/schema"`, `"additionalProperties": false`,
		`"Duration"`, `"pattern"`, `"latency"`, `"const": "drill.dev/v1alpha1"`, `"process-pause"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("schema lacks %s", want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
		err  string
	}{
		{in: "2800/s", want: Rate{Freq: 2800, Per: time.Second}},
		{in: "90/m", want: Rate{Freq: 90, Per: time.Minute}},
		{in: "1400/1s", want: Rate{Freq: 1400, Per: time.Second}},
		{in: "0/s", want: Rate{Per: time.Second}},
		{in: "2800", err: "write e.g. 2800/s"},
		{in: "-1/s", err: "not a whole number"},
		{in: "99999999999999999999/s", err: "out of range"},
		{in: "5/fortnight", err: "period"},
	} {
		got, err := ParseRate(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRate(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
