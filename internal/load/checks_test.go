package load

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

func strp(s string) *string   { return &s }
func nump(x float64) *float64 { return &x }
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestCheckEval: each check's verdict and reason on one response.
func TestCheckEval(t *testing.T) {
	for _, c := range []struct {
		name  string
		check scenario.Check
		code  uint16
		head  http.Header
		body  string
		// want is the failure reason; "" passes; "-" does not apply.
		want string
	}{
		{"header equals", scenario.Check{Header: "retry-after", Equals: strp("5")}, 503, hdr("Retry-After", "5"), "", ""},
		{"header differs", scenario.Check{Header: "Retry-After", Equals: strp("5")}, 503, hdr("Retry-After", "7"), "", `Retry-After "7" != "5"`},
		{"header missing", scenario.Check{Header: "Retry-After", Equals: strp("5")}, 503, hdr(), "", "no header Retry-After"},
		{"header empty equals empty", scenario.Check{Header: "X-A", Equals: strp("")}, 200, hdr("X-A", ""), "", ""},
		{"first header value", scenario.Check{Header: "X-A", Equals: strp("1")}, 200, hdr("X-A", "1", "X-A", "2"), "", ""},
		{"header min", scenario.Check{Header: "Retry-After", Min: nump(1)}, 503, hdr("Retry-After", " 5 "), "", ""},
		{"header below min", scenario.Check{Header: "Retry-After", Min: nump(1)}, 503, hdr("Retry-After", "0"), "", "Retry-After 0 < min 1"},
		{"header above max", scenario.Check{Header: "Retry-After", Max: nump(10)}, 503, hdr("Retry-After", "30"), "", "Retry-After 30 > max 10"},
		{"header not a number", scenario.Check{Header: "Retry-After", Max: nump(10)}, 503, hdr("Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT"), "", `Retry-After "Wed, 21 Oct 2026 07:28:00 GMT" is not a number`},
		{"header NaN", scenario.Check{Header: "X-N", Min: nump(0)}, 200, hdr("X-N", "NaN"), "", `X-N "NaN" is not a number`},
		{"status filter", scenario.Check{Header: "Retry-After", Status: []int{503, 429}, Equals: strp("5")}, 200, hdr(), "", "-"},
		{"no status: transport error", scenario.Check{Header: "Retry-After", Equals: strp("5")}, 0, nil, "", "-"},
		{"json equals", scenario.Check{JSON: "code", Equals: strp("ERR_TAX_BULKHEAD_SATURATED")}, 503, nil,
			`{"type":"about:blank","status":503,"code":"ERR_TAX_BULKHEAD_SATURATED"}`, ""},
		{"json differs", scenario.Check{JSON: "code", Equals: strp("ERR_TAX_BULKHEAD_SATURATED")}, 503, nil,
			`{"code":"ERR_OTHER"}`, `field code "ERR_OTHER" != "ERR_TAX_BULKHEAD_SATURATED"`},
		{"json number text", scenario.Check{JSON: "a.b", Equals: strp("1.50")}, 200, nil, `{"a":{"b":1.50}}`, ""},
		{"json bool and null", scenario.Check{JSON: "a", Equals: strp("null")}, 200, nil, `{"a":null}`, ""},
		{"json min", scenario.Check{JSON: "fallback.tax_cents", Min: nump(1)}, 200, nil, `{"fallback":{"tax_cents":12}}`, ""},
		{"json below min", scenario.Check{JSON: "fallback.tax_cents", Min: nump(1)}, 200, nil, `{"fallback":{"tax_cents":0}}`, "field fallback.tax_cents 0 < min 1"},
		{"json min and max", scenario.Check{JSON: "tax", Min: nump(9.95), Max: nump(10.05)}, 200, nil, `{"tax":10.1}`, "field tax 10.1 > max 10.05"},
		{"json string is no number", scenario.Check{JSON: "tax", Min: nump(1)}, 200, nil, `{"tax":"12"}`, `field tax "12" is not a number`},
		{"json missing field", scenario.Check{JSON: "fallback.tax_cents", Min: nump(1)}, 200, nil, `{"fallback":{}}`, "no field fallback.tax_cents"},
		{"json path through a value", scenario.Check{JSON: "fallback.tax_cents", Min: nump(1)}, 200, nil, `{"fallback":3}`, "no field fallback.tax_cents"},
		{"json object", scenario.Check{JSON: "fallback", Equals: strp("x")}, 200, nil, `{"fallback":{"a":1}}`, "field fallback is an object or an array, not a value"},
		{"not JSON", scenario.Check{JSON: "code", Equals: strp("x")}, 503, nil, `<html>busy</html>`, "body is not JSON: invalid character '<'"},
		{"empty body", scenario.Check{JSON: "code", Equals: strp("x")}, 503, nil, ``, "body is not JSON: empty body"},
		{"trailing data", scenario.Check{JSON: "code", Equals: strp("x")}, 503, nil, `{"code":"x"} {}`, "body is not JSON: data after the document"},
		{"body cut", scenario.Check{JSON: "code", Equals: strp("x")}, 200, nil, `{"code":"x","pad":"` + strings.Repeat("a", scenario.CheckBodyLimit) + `"}`, "body cut at 65536 bytes"},
		{"status equals", scenario.Check{StatusCode: true, Equals: strp("429")}, 429, nil, "", ""},
		{"status differs", scenario.Check{StatusCode: true, Equals: strp("429")}, 503, nil, "", `status "503" != "429"`},
		{"status within", scenario.Check{StatusCode: true, Min: nump(400), Max: nump(499)}, 429, nil, "", ""},
		{"status above max", scenario.Check{StatusCode: true, Max: nump(499)}, 503, nil, "", "status 503 > max 499"},
		{"retried enough", scenario.Check{StatusCode: true, MinRetries: 4, Equals: strp("429")}, 503, hdr(RetriesHeader, "5"), "", `status "503" != "429"`},
		{"retried exactly enough", scenario.Check{StatusCode: true, MinRetries: 4, Equals: strp("429")}, 429, hdr(RetriesHeader, "4"), "", ""},
		{"retried too little", scenario.Check{StatusCode: true, MinRetries: 4, Equals: strp("429")}, 503, hdr(RetriesHeader, "3"), "", "-"},
		{"not retried", scenario.Check{StatusCode: true, MinRetries: 1, Equals: strp("429")}, 503, hdr(), "", "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.check.Name = "c"
			cs := newCheckSet(scenario.Stream{Checks: []scenario.Check{c.check}})
			vs := cs.eval(&vegeta.Result{Code: c.code, Headers: c.head, Body: []byte(c.body)})
			if c.want == "-" {
				if len(vs) != 0 {
					t.Fatalf("applied: %+v", vs)
				}
				return
			}
			if len(vs) != 1 {
				t.Fatalf("%d verdicts, want 1", len(vs))
			}
			got := ""
			if vs[0].why.kind != passed {
				got = vs[0].c.reason(vs[0].why)
			}
			if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
				t.Fatalf("reason = %q, want %q", got, c.want)
			}
		})
	}
}

// TestNoChecksNoCost: a stream without checks has no check set and keeps
// no body; one with only header checks keeps none either.
func TestNoChecksNoCost(t *testing.T) {
	base := scenario.Stream{Name: "s", Targets: []scenario.Target{{URL: "http://127.0.0.1:1/"}}, Rate: rate(1, time.Second), Duration: dur(time.Second)}
	withHeader := base
	withHeader.Name = "h"
	withHeader.Checks = []scenario.Check{{Name: "ra", Header: "Retry-After", Equals: strp("5")}}
	withJSON := base
	withJSON.Name = "j"
	withJSON.Checks = []scenario.Check{{Name: "code", JSON: "code", Equals: strp("x")}}
	e, err := New(event.NewClock(), []scenario.Stream{base, withHeader, withJSON}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := e.streams[0]; s.checks != nil || s.maxBody != 0 {
		t.Errorf("no checks: check set %v, maxBody %d", s.checks, s.maxBody)
	}
	if s := e.streams[1]; s.checks == nil || s.maxBody != 0 {
		t.Errorf("header check: check set %v, maxBody %d, want a set and 0", s.checks, s.maxBody)
	}
	if s := e.streams[2]; s.maxBody != scenario.CheckBodyLimit+1 {
		t.Errorf("json check: maxBody %d, want %d", s.maxBody, scenario.CheckBodyLimit+1)
	}
}

// bothTransports are the two ways a stream sends: the lean HTTP/1.1
// transport (no maxConnections) and net/http's (maxConnections set).
var bothTransports = []struct {
	name     string
	maxConns int
}{{"lean", 0}, {"net/http", 64}}

// TestChecksThroughBothTransports runs a stream with a header check and
// json checks against a loopback server whose every fourth answer breaks
// them, through the lean HTTP/1.1 transport and through net/http's (a
// stream with maxConnections): both deliver the headers and the body, so
// the counts match what the server sent, and the failures carry reasons.
func TestChecksThroughBothTransports(t *testing.T) {
	for _, tc := range bothTransports {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n, bad, shed := 0, 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				i := n
				n++
				if i%2 == 0 {
					shed++
				}
				if i%4 == 0 {
					bad++
				}
				mu.Unlock()
				switch {
				case i%4 == 0: // shed, wrong Retry-After, wrong code
					w.Header().Set("Retry-After", "7")
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(503)
					fmt.Fprint(w, `{"status":503,"code":"ERR_OTHER"}`)
				case i%2 == 0: // shed as claimed
					w.Header().Set("Retry-After", "5")
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(503)
					fmt.Fprint(w, `{"status":503,"code":"ERR_TAX_BULKHEAD_SATURATED","fallback":{"tax_cents":3}}`)
				default:
					fmt.Fprint(w, `{"fallback":{"tax_cents":120}}`)
				}
			}))
			defer srv.Close()
			st := scenario.Stream{Name: "tax", Targets: []scenario.Target{{URL: srv.URL + "/tax"}},
				Rate: rate(40, time.Second), Duration: dur(500 * time.Millisecond), LagBudget: relaxed,
				MaxConnections: tc.maxConns,
				Checks: []scenario.Check{
					{Name: "retry-after-5", Status: []int{503, 429}, Header: "Retry-After", Equals: strp("5")},
					{Name: "problem-code", Status: []int{503}, JSON: "code", Equals: strp("ERR_TAX_BULKHEAD_SATURATED")},
					{Name: "tax-positive", Status: []int{200, 503}, JSON: "fallback.tax_cents", Min: nump(1)},
				}}
			e := runStreams(t, event.NewClock(), Options{}, st)
			if lean := e.streams[0].lean != nil; lean != (tc.maxConns == 0) {
				t.Fatalf("lean transport in use: %v", lean)
			}
			total := e.Series()["tax"].Total()
			mu.Lock()
			defer mu.Unlock()
			if total.Requests != int64(n) || n == 0 {
				t.Fatalf("recorded %d requests, server answered %d", total.Requests, n)
			}
			want := map[string]measure.CheckCount{
				"retry-after-5": {Applied: int64(shed), Failed: int64(bad)},
				"problem-code":  {Applied: int64(shed), Failed: int64(bad)},
				"tax-positive":  {Applied: int64(n), Failed: int64(bad)},
			}
			reasons := map[string]string{
				"retry-after-5": `Retry-After "7" != "5"`,
				"problem-code":  `field code "ERR_OTHER" != "ERR_TAX_BULKHEAD_SATURATED"`,
				"tax-positive":  "no field fallback.tax_cents",
			}
			for name, w := range want {
				got := total.Checks[name]
				if got.Applied != w.Applied || got.Failed != w.Failed {
					t.Errorf("%s: applied %d failed %d, want %d and %d", name, got.Applied, got.Failed, w.Applied, w.Failed)
				}
				if len(got.Examples) != min(bad, measure.MaxCheckExamples) {
					t.Errorf("%s: %d examples, want %d", name, len(got.Examples), min(bad, measure.MaxCheckExamples))
				}
				for _, f := range got.Examples {
					if f.Status != 503 || f.Reason != reasons[name] {
						t.Errorf("%s: example %+v, want 503 and %q", name, f, reasons[name])
					}
				}
			}
		})
	}
}

// TestChecksSkipServiceAnswers: the checks count the service's answers,
// not those drill's local Service gave itself (no ready endpoint), and an
// empty status list means every status.
func TestChecksSkipServiceAnswers(t *testing.T) {
	st := scenario.Stream{Name: "tax", Targets: []scenario.Target{{URL: "http://127.0.0.1:1/"}}, Rate: rate(10, time.Second), Duration: dur(time.Second),
		Checks: []scenario.Check{{Name: "ra", Status: []int{}, Header: "Retry-After", Equals: strp("5")}}}
	e, err := New(event.NewClock(), []scenario.Stream{st}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := e.streams[0]
	now := time.Now()
	s.record(&vegeta.Result{Seq: 0, Code: 503, Headers: hdr(measure.ServiceAnswerHeader, "no-endpoints"), Timestamp: now})
	s.record(&vegeta.Result{Seq: 1, Code: 503, Headers: hdr("Retry-After", "5"), Timestamp: now})
	s.record(&vegeta.Result{Seq: 2, Code: 200, Headers: hdr(), Timestamp: now})
	var got measure.CheckCount
	for _, b := range s.rec.snapshot(0, 1) {
		got = b.Checks["ra"]
	}
	if got.Applied != 2 || got.Failed != 1 || len(got.Examples) != 1 || got.Examples[0].Reason != "no header Retry-After" || got.Examples[0].Status != 200 {
		t.Fatalf("check = %+v, want 2 applied (the service's answers), 1 failed (the 200)", got)
	}
}

// TestRetryStormChecks runs a stream whose clients retry every 5 ms and
// say which retry each attempt is (attemptHeader) against a server that
// counts attempts as BULKHEAD-PAY-001 ADV-IR-01 says (more than 3 retries
// answered 429, otherwise shed with 503), through both transports: the
// server sees X-Retry-Attempt 1..4 on the retries and none on the first
// attempt, every exchange ends in the 429 of the 4th retry, and a check
// on the answers to 4 or more retries counts each of them once.
func TestRetryStormChecks(t *testing.T) {
	for _, tc := range bothTransports {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			attempts := map[string]int{} // X-Retry-Attempt value ("" first) -> count
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a := r.Header.Get("X-Retry-Attempt")
				mu.Lock()
				attempts[a]++
				mu.Unlock()
				if a == "4" {
					w.Header().Set("Retry-After", "5")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			st := scenario.Stream{Name: "storm", Targets: []scenario.Target{{Method: "POST", URL: srv.URL + "/tax", Body: "x"}},
				Rate: rate(20, time.Second), Duration: dur(500 * time.Millisecond), Timeout: dur(2 * time.Second), LagBudget: relaxed,
				MaxConnections: tc.maxConns,
				Retry: &scenario.Retry{Policy: scenario.RetryFixed, Interval: dur(5 * time.Millisecond), MaxAttempts: 8,
					On: []int{503}, AttemptHeader: "x-retry-attempt"},
				Checks: []scenario.Check{
					{Name: "blocked-after-3", MinRetries: 4, StatusCode: true, Equals: strp("429")},
					{Name: "never-5", MinRetries: 5, StatusCode: true, Equals: strp("429")},
				}}
			e := runStreams(t, event.NewClock(), Options{}, st)
			total := e.Series()["storm"].Total()
			mu.Lock()
			defer mu.Unlock()
			n := int64(attempts[""])
			if n == 0 || total.Requests != n {
				t.Fatalf("recorded %d requests, server saw %d first attempts", total.Requests, n)
			}
			for _, a := range []string{"1", "2", "3", "4"} {
				if int64(attempts[a]) != n {
					t.Errorf("X-Retry-Attempt %s on %d attempts, want %d (%v)", a, attempts[a], n, attempts)
				}
			}
			if len(attempts) != 5 {
				t.Errorf("attempt headers seen: %v, want only none and 1..4", attempts)
			}
			if total.Codes[429] != n || total.Retries != 4*n {
				t.Errorf("codes %v, retries %d; want %d 429s after %d retries", total.Codes, total.Retries, n, 4*n)
			}
			if got := total.Checks["blocked-after-3"]; got.Applied != n || got.Failed != 0 {
				t.Errorf("blocked-after-3: applied %d failed %d, want %d and 0", got.Applied, got.Failed, n)
			}
			if got, ok := total.Checks["never-5"]; ok && got.Applied != 0 {
				t.Errorf("never-5 applied to %d answers; no exchange took 5 retries", got.Applied)
			}
		})
	}
}
