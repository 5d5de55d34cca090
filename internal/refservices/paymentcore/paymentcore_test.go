package paymentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

// taxStub is a real HTTP tax API whose latency can change during a test.
type taxStub struct {
	srv   *httptest.Server
	delay atomic.Int64 // ns
	calls atomic.Int64
}

func newTaxStub(t *testing.T) *taxStub {
	t.Helper()
	s := &taxStub{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		// Read the body first: only then does the server notice a client
		// that gives up (and cancel r.Context()).
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(time.Duration(s.delay.Load())):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jurisdiction":"US-CA","rate":0.0725}`))
	}))
	t.Cleanup(func() { s.srv.CloseClientConnections(); s.srv.Close() })
	return s
}

func startCore(t *testing.T, cfg Config) (*Service, string) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := refservicestest.Run(t, s)
	refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
	return s, u
}

const (
	authBody = `{"id":"a-1","amountCents":1299,"currency":"USD"}` // as the shipped scenario sends
	taxBody  = `{"id":"t-1","amountCents":10000,"jurisdiction":"US-CA"}`
)

type problemBody struct {
	Type     string    `json:"type"`
	Status   int       `json:"status"`
	Code     string    `json:"code"`
	Lane     string    `json:"lane"`
	Fallback *TaxQuote `json:"fallback"`
}

// TestCorrectBuildShedsTaxAndKeepsAuthFast is the INC-4491 drill in
// small (MC-FM-01, MC-RT-01, INV-BH-01, INV-BH-02): with the tax API slowed
// to seconds, the tax lane's 15 workers fill, further tax requests are shed
// at once with 503, Retry-After: 5, a problem body and the cached rate,
// while card authorisations stay fast; the lane recovers after.
func TestCorrectBuildShedsTaxAndKeepsAuthFast(t *testing.T) {
	pg := testutil.Postgres(t)
	stub := newTaxStub(t)
	s, u := startCore(t, Config{DatabaseURL: pg.DSN, TaxAPIURL: stub.srv.URL + "/v1/rate"})

	r := refservicestest.Do(http.MethodPost, u+"/tax", taxBody, 5*time.Second)
	var q TaxQuote
	if err := json.Unmarshal([]byte(r.Body), &q); r.Status != http.StatusOK || err != nil || q.Source != SourceTaxAPI || q.TaxCents != 725 {
		t.Fatalf("POST /tax before the brownout: %d %q, want 200 from the tax API with 725 cents", r.Status, r.Body)
	}

	stub.delay.Store(int64(3 * time.Second))
	var wg sync.WaitGroup
	slow := make(chan refservicestest.Response, DefaultTaxLane.Workers)
	for range DefaultTaxLane.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slow <- refservicestest.Do(http.MethodPost, u+"/tax", taxBody, 15*time.Second)
		}()
	}
	waitFor(t, func() bool { return s.Bulkhead(LaneTax).Stats(LaneTax).Active == DefaultTaxLane.Workers })

	for i := range 5 {
		r := refservicestest.Do(http.MethodPost, u+"/tax", taxBody, 5*time.Second)
		var p problemBody
		_ = json.Unmarshal([]byte(r.Body), &p)
		switch {
		case r.Status != http.StatusServiceUnavailable:
			t.Errorf("shed tax %d: status %d body %q, want 503", i, r.Status, r.Body)
		case r.Elapsed > time.Second:
			t.Errorf("shed tax %d took %s; a rejection must not wait", i, r.Elapsed)
		case r.Header.Get("Retry-After") != "5":
			t.Errorf("shed tax %d: Retry-After %q, want 5", i, r.Header.Get("Retry-After"))
		case r.Header.Get("Content-Type") != refservices.ProblemContentType:
			t.Errorf("shed tax %d: Content-Type %q, want %s", i, r.Header.Get("Content-Type"), refservices.ProblemContentType)
		case p.Code != CodeTaxSaturated || p.Status != 503 || p.Lane != "tax_calc":
			t.Errorf("shed tax %d: problem %+v, want code %s lane tax_calc", i, p, CodeTaxSaturated)
		case p.Fallback == nil || p.Fallback.Rate != 0.0725 || p.Fallback.TaxCents != 725 || p.Fallback.Source != SourceCache || p.Fallback.FallbackReason != "shed":
			t.Errorf("shed tax %d: fallback %+v, want the cached US-CA rate 0.0725 (725 cents)", i, p.Fallback)
		}
	}

	// Card authorisations are untouched by the tax brownout (INV-BH-01).
	for _, r := range refservicestest.DoAll(40, http.MethodPost, u+"/auth", authBody, 5*time.Second) {
		if r.Status != http.StatusOK || r.Elapsed > 2*time.Second {
			t.Errorf("auth during the tax brownout: status %d in %s (%q), want 200 quickly", r.Status, r.Elapsed, r.Body)
		}
	}
	m := scrape(t, u)
	for _, fam := range []string{"bulkhead_active_workers", "bulkhead_queue_depth", "bulkhead_rejections_total", "bulkhead_state",
		"bulkhead_admitted_total", "bulkhead_max_workers", "bulkhead_db_pool_acquired_conns", "tax_fallback_total", "refsvc_started"} {
		if _, ok := m[fam]; !ok {
			t.Errorf("/metrics lacks %s", fam)
		}
	}
	if v := gauge(m, "bulkhead_state", "tax_calc", "SATURATED"); v != 1 {
		t.Errorf("bulkhead_state{tax_calc,SATURATED} = %v, want 1", v)
	}
	if v := gauge(m, "bulkhead_state", "card_auth", "NORMAL"); v != 1 {
		t.Errorf("bulkhead_state{card_auth,NORMAL} = %v, want 1", v)
	}
	if v := gauge(m, "bulkhead_rejections_total", "tax_calc", ""); v < 5 {
		t.Errorf("bulkhead_rejections_total{tax_calc} = %v, want >= 5", v)
	}
	if v := gauge(m, "bulkhead_active_workers", "tax_calc", ""); v != 15 {
		t.Errorf("bulkhead_active_workers{tax_calc} = %v, want 15", v)
	}
	// The tax lane's workers wait on the tax API; card_auth's never do
	// (MC-FM-01.4).
	if v := gauge(m, "bulkhead_blocked_workers", "tax_calc", ""); v != 15 {
		t.Errorf("bulkhead_blocked_workers{tax_calc} = %v, want 15", v)
	}
	if v := gauge(m, "bulkhead_blocked_workers", "card_auth", ""); v != 0 {
		t.Errorf("bulkhead_blocked_workers{card_auth} = %v, want 0", v)
	}

	// The slow ones complete from the API (3 s < the 10 s timeout), and the
	// lane drains.
	stub.delay.Store(0)
	wg.Wait()
	close(slow)
	for r := range slow {
		if r.Status != http.StatusOK || !strings.Contains(r.Body, SourceTaxAPI) {
			t.Errorf("slow tax: %d %q, want 200 from the tax API", r.Status, r.Body)
		}
	}
	waitFor(t, func() bool { return s.Bulkhead(LaneTax).Stats(LaneTax).Active == 0 })
	if st := s.Bulkhead(LaneTax).State(); st != StateRecovering {
		t.Errorf("tax lane state after the brownout: %s, want RECOVERING", st)
	}
	if r := refservicestest.Do(http.MethodPost, u+"/tax", taxBody, 5*time.Second); r.Status != http.StatusOK {
		t.Errorf("tax after the brownout: %d %q, want 200", r.Status, r.Body)
	}
}

// TestTaxTimeoutFallsBackToCache: a tax call past its timeout answers from
// the cached table, never a zero rate (ADV-UC-01).
func TestTaxTimeoutFallsBackToCache(t *testing.T) {
	pg := testutil.Postgres(t)
	stub := newTaxStub(t)
	stub.delay.Store(int64(5 * time.Second))
	_, u := startCore(t, Config{DatabaseURL: pg.DSN, TaxAPIURL: stub.srv.URL, TaxTimeout: 200 * time.Millisecond})
	r := refservicestest.Do(http.MethodPost, u+"/tax", `{"jurisdiction":"US-NJ","amount_cents":10000}` /* snake_case accepted too */, 5*time.Second)
	var q TaxQuote
	if err := json.Unmarshal([]byte(r.Body), &q); err != nil || r.Status != http.StatusOK {
		t.Fatalf("POST /tax: %d %q", r.Status, r.Body)
	}
	if q.Source != SourceCache || q.FallbackReason != "timeout" || q.Rate != 0.0663 || q.TaxCents != 663 || q.TableVersion == "" {
		t.Errorf("quote %+v, want the cached US-NJ rate 0.0663 after a timeout", q)
	}
	m := scrape(t, u)
	if v := gauge(m, "tax_fallback_total", "", "timeout"); v != 1 {
		t.Errorf("tax_fallback_total{reason=timeout} = %v, want 1", v)
	}
}

// TestAuthRejectionAndRetryStorm: a full card_auth lane answers 429 with
// Retry-After: 5 and ERR_AUTH_BULKHEAD_SATURATED (MC-PO-01, INV-BH-04); a
// fourth retry is blocked (ADV-IR-01); bad input is a 400 problem.
func TestAuthRejectionAndRetryStorm(t *testing.T) {
	pg := testutil.Postgres(t)
	s, u := startCore(t, Config{DatabaseURL: pg.DSN, Auth: LaneConfig{Workers: 1, Queue: 0, Pool: 1}})
	p, err := s.Bulkhead(LaneAuth).Acquire(context.Background(), LaneAuth)
	if err != nil {
		t.Fatal(err)
	}
	r := refservicestest.Do(http.MethodPost, u+"/auth", authBody, 5*time.Second)
	var pb problemBody
	_ = json.Unmarshal([]byte(r.Body), &pb)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "5" || pb.Code != CodeAuthSaturated {
		t.Errorf("auth on a full lane: %d Retry-After %q body %q, want 429, 5, %s", r.Status, r.Header.Get("Retry-After"), r.Body, CodeAuthSaturated)
	}
	p.Release()
	if r := refservicestest.Do(http.MethodPost, u+"/auth", authBody, 5*time.Second); r.Status != http.StatusOK {
		t.Errorf("auth on a free lane: %d %q, want 200", r.Status, r.Body)
	}
	r = refservicestest.Do(http.MethodPost, u+"/auth", authBody, 5*time.Second, RetryAttemptHeader, "4")
	if r.Status != http.StatusTooManyRequests || !strings.Contains(r.Body, CodeRetryStorm) || r.Header.Get("Retry-After") != "5" {
		t.Errorf("fourth retry: %d %q, want 429 %s with Retry-After", r.Status, r.Body, CodeRetryStorm)
	}
	if r := refservicestest.Do(http.MethodPost, u+"/auth", authBody, 5*time.Second, RetryAttemptHeader, "3"); r.Status != http.StatusOK {
		t.Errorf("third retry: %d %q, want 200", r.Status, r.Body)
	}
	for _, tc := range []struct{ path, body string }{
		{"/auth", `{"amountCents":1}`},
		{"/auth", `{"card":"tok_1"}`},
		{"/tax", `{"amountCents":1}`},
		{"/fraud", `not json`},
	} {
		if r := refservicestest.Do(http.MethodPost, u+tc.path, tc.body, 5*time.Second); r.Status != http.StatusBadRequest || !strings.Contains(r.Body, CodeInvalid) {
			t.Errorf("POST %s %s: %d %q, want 400 %s", tc.path, tc.body, r.Status, r.Body, CodeInvalid)
		}
	}
	if r := refservicestest.Do(http.MethodPost, u+"/fraud", `{"card":"tok_1","amount_cents":5}`, 5*time.Second); r.Status != http.StatusOK || !strings.Contains(r.Body, `"decision"`) {
		t.Errorf("POST /fraud: %d %q, want 200 with a decision", r.Status, r.Body)
	}
}

// TestNaiveBuildAuthDegrades: in the shared pool, tax calls hold database
// connections while the tax API is slow, and card authorisations can no
// longer get one (INC-4491).
func TestNaiveBuildAuthDegrades(t *testing.T) {
	pg := testutil.Postgres(t) // max_connections 300 by default
	stub := newTaxStub(t)
	s, u := startCore(t, Config{DatabaseURL: pg.DSN, TaxAPIURL: stub.srv.URL, Build: refservices.BuildNaive})
	if r := refservicestest.Do(http.MethodPost, u+"/auth", authBody, 5*time.Second); r.Status != http.StatusOK {
		t.Fatalf("auth before the brownout: %d %q", r.Status, r.Body)
	}
	// 8 s, the spec's brownout: the 52 connections the pool opens beyond
	// its warm 8 take seconds on a slow, busy machine, and every tax call
	// must still hold its connection when the last one is opened.
	stub.delay.Store(int64(8 * time.Second))
	var wg sync.WaitGroup
	taxes := make(chan refservicestest.Response, DefaultSharedLane.Pool+10)
	for range DefaultSharedLane.Pool + 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taxes <- refservicestest.Do(http.MethodPost, u+"/tax", taxBody, 15*time.Second)
		}()
	}
	defer wg.Wait()
	pools := s.pools.Load()
	waitFor(t, func() bool { return pools.byLane[LaneTax].Stat().AcquiredConns() == DefaultSharedLane.Pool })

	fast := 0
	var seen []string
	for _, r := range refservicestest.DoAll(10, http.MethodPost, u+"/auth", authBody, 10*time.Second) {
		seen = append(seen, fmt.Sprintf("%d/%s", r.Status, r.Elapsed.Round(time.Millisecond)))
		if r.Status == http.StatusOK && r.Elapsed < 300*time.Millisecond {
			fast++
		}
	}
	if fast > 0 {
		t.Errorf("naive build: %d of 10 card auths were fast during the tax brownout (%v); want none", fast, seen)
	}
	t.Logf("naive card auths during the brownout (status/latency): %v", seen)
	// The shared workers waiting on the tax API are card_auth's too
	// (MC-FM-01.4's anti-pattern).
	if v := gauge(scrape(t, u), "bulkhead_blocked_workers", "card_auth", ""); v < 1 {
		t.Errorf("naive bulkhead_blocked_workers{card_auth} = %v during the brownout, want the shared workers waiting on the tax API", v)
	}

	// The tax calls that found the shared pool exhausted fell back to
	// zero tax, from no table (ADV-UC-01.2's anti-pattern).
	wg.Wait()
	close(taxes)
	zero := 0
	for r := range taxes {
		if r.Status != http.StatusServiceUnavailable {
			continue
		}
		var p problemBody
		if err := json.Unmarshal([]byte(r.Body), &p); err != nil || p.Fallback == nil {
			t.Errorf("naive tax on an exhausted pool: %d %q, want a fallback quote", r.Status, r.Body)
			continue
		}
		if p.Fallback.TaxCents != 0 || p.Fallback.Rate != 0 || p.Fallback.Source != SourceDefault {
			t.Errorf("naive tax fallback %+v, want zero tax from source %q", p.Fallback, SourceDefault)
		}
		zero++
	}
	if zero == 0 {
		t.Error("no naive tax call found the shared pool exhausted; want the 10 beyond its size to")
	}
}

func scrape(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(u + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// gauge returns the value of family's sample whose lane (if lane != "")
// and state or reason label (if second != "") match; -1 if absent.
func gauge(mfs map[string]*dto.MetricFamily, family, lane, second string) float64 {
	mf, ok := mfs[family]
	if !ok {
		return -1
	}
next:
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "lane":
				if lane != "" && l.GetValue() != lane {
					continue next
				}
			case "state", "reason":
				if second != "" && l.GetValue() != second {
					continue next
				}
			}
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}
