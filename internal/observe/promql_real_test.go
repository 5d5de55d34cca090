package observe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/refservices/paymentcore"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil/promtest"
)

// realWait bounds each wait on the real Prometheus: a scrape every second
// and a query every 200 ms, on a machine that may be busy.
const realWait = 90 * time.Second

// realPrometheus serves a payment-core (correct build; its database
// unreachable, which its /metrics does not need) in-process and starts a
// real Prometheus scraping its /metrics as job "payment-core". It returns
// the service, its host:port and Prometheus' URL once the first scrape
// is queryable.
func realPrometheus(t *testing.T) (*paymentcore.Service, string, string) {
	t.Helper()
	svc, err := paymentcore.New(paymentcore.Config{DatabaseURL: "postgres://drill@127.0.0.1:1/drill?connect_timeout=1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := refservicestest.Run(t, svc)
	addr := strings.TrimPrefix(u, "http://")
	prom := promtest.StartPrometheus(t, promtest.Target{Job: "payment-core", Addr: addr})
	promtest.WaitQuery(t, prom.URL, `bulkhead_max_workers{job="payment-core"}`, realWait, func(s []promtest.Sample) error {
		if len(s) != 3 {
			return fmt.Errorf("%w: %d lanes scraped", promtest.ErrNotYet, len(s))
		}
		return nil
	})
	return svc, addr, prom.URL
}

// TestPromQLRealPrometheus: the PromQL observer against a real Prometheus
// scraping a reference service: instant queries give one event per
// series with the series' labels (vector) or none (scalar), errors name
// the query; a running observer follows a gauge the test moves (0, then
// 3 busy tax workers, then 0 again), in order; a range query over the
// same time holds the same values, the 3 no earlier than it was set.
func TestPromQLRealPrometheus(t *testing.T) {
	t.Parallel()
	svc, addr, promURL := realPrometheus(t)

	t.Run("query once", func(t *testing.T) {
		inst := "instance=" + addr + ",job=payment-core"
		for _, tc := range []struct {
			query   string
			want    []string // "labels value", sorted
			wantErr string
		}{
			{query: `bulkhead_max_workers{job="payment-core"}`, want: []string{
				inst + ",lane=card_auth 75", inst + ",lane=fraud_eval 30", inst + ",lane=tax_calc 15"}},
			{query: `sum by (job) (bulkhead_max_workers)`, want: []string{"job=payment-core 120"}},
			{query: `scalar(bulkhead_max_workers{lane="tax_calc"})`, want: []string{" 15"}},
			{query: `bulkhead_max_workers[1m]`, wantErr: "result type matrix, want vector or scalar"},
			{query: `sum(`, wantErr: "bad_data"},
		} {
			t.Run(tc.query, func(t *testing.T) {
				q := &PromQL{Name: "workers", URL: promURL, Query: tc.query, Clock: event.NewClock(), Sink: newCollect()}
				evs, _, err := q.QueryOnce(context.Background())
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.query) {
						t.Fatalf("err = %v, want one naming the query and containing %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range evs {
					if e.Kind != event.Metric || e.Metric != "workers" || e.Source != SourcePromQL {
						t.Errorf("event %+v", e)
					}
					got = append(got, allLabels(e.Labels)+" "+fmt.Sprint(e.Value))
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
	})

	t.Run("run follows a gauge", func(t *testing.T) {
		const query = `bulkhead_active_workers{job="payment-core",lane="tax_calc"}`
		clock := event.NewClock()
		sink := newCollect()
		q := &PromQL{Name: "tax-workers", URL: promURL, Query: query, Interval: 200 * time.Millisecond, Clock: clock, Sink: sink}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = q.Run(ctx) }()
		stop := func() { cancel(); <-done }
		defer stop()

		values := func(ev []event.Event) []float64 {
			var vs []float64
			for _, e := range ev {
				if e.Kind == event.Metric {
					vs = append(vs, e.Value)
				}
			}
			return vs
		}
		waitValues(t, sink, "0 busy tax workers", func(vs []float64) bool { return slices.Contains(vs, 0) }, values)
		bh := svc.Bulkhead(paymentcore.LaneTax)
		var permits []paymentcore.Permit
		for range 3 {
			p, err := bh.Acquire(context.Background(), paymentcore.LaneTax)
			if err != nil {
				t.Fatal(err)
			}
			permits = append(permits, p)
		}
		held := clock.Now()
		waitValues(t, sink, "3 busy tax workers", func(vs []float64) bool { return slices.Contains(vs, 3) }, values)
		for _, p := range permits {
			p.Release()
		}
		waitValues(t, sink, "0 again after 3", func(vs []float64) bool {
			i := slices.Index(vs, 3)
			return i >= 0 && slices.Contains(vs[i:], 0)
		}, values)
		stop()
		to := clock.Now()

		ev := sink.snapshot()
		// In order: zeros, rising to 3, falling to 0 (a scrape may land
		// between two of the three acquires or releases); nothing else;
		// every event is the one series with its labels.
		var phases []float64
		for i, e := range ev {
			if e.Kind != event.Metric || e.Source != SourcePromQL || e.Metric != "tax-workers" ||
				allLabels(e.Labels) != "instance="+addr+",job=payment-core,lane=tax_calc" {
				t.Fatalf("event %d: %s\n%s", i, fmtEvent(e), dump(ev))
			}
			if i > 0 && e.At < ev[i-1].At {
				t.Fatalf("event %d out of order:\n%s", i, dump(ev))
			}
			if len(phases) == 0 || phases[len(phases)-1] != e.Value {
				phases = append(phases, e.Value)
			}
		}
		peak := slices.Index(phases, 3)
		if len(phases) < 3 || phases[0] != 0 || phases[len(phases)-1] != 0 || peak < 0 ||
			!slices.IsSorted(phases[:peak+1]) || !slices.IsSortedFunc(phases[peak:], func(a, b float64) int { return cmp.Compare(b, a) }) {
			t.Fatalf("values went %v, want 0, up to 3, down to 0:\n%s", phases, dump(ev))
		}

		api, err := NewPromAPI(promURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		rng, err := QueryRange(context.Background(), api, clock, "tax-workers", query, 0, to, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var seen3 bool
		for i, e := range rng {
			if e.Value < 0 || e.Value > 3 || i > 0 && e.At <= rng[i-1].At {
				t.Fatalf("range sample %d: %s\n%s", i, fmtEvent(e), dump(rng))
			}
			if e.Value == 3 {
				seen3 = true
				if e.At < held-time.Second {
					t.Errorf("3 busy workers at %s, before they were taken at %s", e.At, held)
				}
			}
		}
		if !seen3 {
			t.Logf("the 3 busy workers fell between the range's 1 s steps:\n%s", dump(rng))
		}
	})
}

// allLabels writes every label as k=v, sorted, comma separated.
func allLabels(l map[string]string) string {
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// waitValues waits (at most [realWait]) until ok holds for the values of
// the collected events.
func waitValues(t *testing.T, c *collect, what string, ok func([]float64) bool, values func([]event.Event) []float64) {
	t.Helper()
	deadline := time.After(realWait)
	for {
		if ok(values(c.snapshot())) {
			return
		}
		select {
		case <-c.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; events:\n%s", realWait, what, dump(c.snapshot()))
		}
	}
}
