package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// problemBody is the shed answer the benchmarks' server gives: an RFC 9457
// problem with a code, 120-odd bytes.
const problemBody = `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"ERR_TAX_BULKHEAD_SATURATED","fallback":{"tax_cents":12}}`

// checkVariants are the same stream with no checks, one header check and
// one json check, each applying to every answer of the server (503).
func checkVariants(url string) []scenario.Stream {
	base := scenario.Stream{Targets: []scenario.Target{{URL: url}}, Rate: rate(1000, time.Second), Duration: dur(time.Hour)}
	none, header, json := base, base, base
	none.Name, header.Name, json.Name = "none", "header", "json"
	header.Checks = []scenario.Check{{Name: "retry-after-5", Status: []int{503, 429}, Header: "Retry-After", Equals: strp("5")}}
	json.Checks = []scenario.Check{{Name: "problem-code", Status: []int{503}, JSON: "code", Equals: strp("ERR_TAX_BULKHEAD_SATURATED")}}
	return []scenario.Stream{none, header, json}
}

func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, problemBody)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// hitOnce is vegeta's hit for stream s, without its attacker: send seq's
// request with the stream's client, keep s.maxBody bytes of the body,
// read the rest, and record the result.
func hitOnce(b *testing.B, s *stream, req *http.Request, seq uint64) {
	r := req.Clone(context.Background())
	r.Header.Set("X-Vegeta-Seq", strconv.FormatUint(seq, 10))
	res := vegeta.Result{Seq: seq, Timestamp: time.Now()}
	resp, err := s.client.Do(r)
	if err != nil {
		b.Fatal(err)
	}
	if res.Body, err = io.ReadAll(io.LimitReader(resp.Body, s.maxBody)); err != nil {
		b.Fatal(err)
	}
	if _, err = io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	res.Code, res.Headers, res.Latency = uint16(resp.StatusCode), resp.Header, time.Since(res.Timestamp)
	s.record(&res)
}

// BenchmarkChecksRequest is the cost of one request of a stream with no
// checks, one header check and one json check: sent through the lean
// HTTP/1.1 transport to a loopback server that sheds with a problem body,
// the body read as vegeta reads it, and the result recorded (checks
// included). The difference between the variants is what checks cost per
// request, exchange included.
func BenchmarkChecksRequest(b *testing.B) {
	srv := benchServer(b)
	for _, st := range checkVariants(srv.URL + "/tax") {
		b.Run(st.Name, func(b *testing.B) {
			e, err := New(event.NewClock(), []scenario.Stream{st}, Options{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s := e.streams[0]
			defer s.closeIdle()
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/tax", nil)
			if err != nil {
				b.Fatal(err)
			}
			hitOnce(b, s, req, 0) // open the connection
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				hitOnce(b, s, req, uint64(i+1)%1_000_000)
			}
		})
	}
}

// BenchmarkChecksRecord is the result path alone: recording one shed
// result (Retry-After: 5, a problem body) of a stream with no checks, one
// header check and one json check.
func BenchmarkChecksRecord(b *testing.B) {
	for _, st := range checkVariants("http://127.0.0.1:1/tax") {
		b.Run(st.Name, func(b *testing.B) {
			e, err := New(event.NewClock(), []scenario.Stream{st}, Options{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s := e.streams[0]
			h := http.Header{}
			h.Set("Retry-After", "5")
			h.Set("Content-Type", "application/problem+json")
			var body []byte
			if s.maxBody > 0 {
				body = []byte(problemBody)
			}
			now := time.Now()
			s.record(&vegeta.Result{Code: 503, Headers: h, Body: body, Timestamp: now}) // the first second's bucket
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				s.record(&vegeta.Result{Seq: uint64(i) % 500, Code: 503, Headers: h, Body: body, Timestamp: now, Latency: time.Millisecond})
			}
		})
	}
}
