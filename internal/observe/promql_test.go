package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// fakeProm speaks the Prometheus HTTP API (query and query_range) for a
// few canned expressions. Queries arrive as POST forms (GET after 405).
type fakeProm struct {
	t    *testing.T
	fail atomic.Bool
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		f.t.Errorf("parse form: %v", err)
	}
	q := r.Form.Get("query")
	w.Header().Set("Content-Type", "application/json")
	reply := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if f.fail.Load() {
		reply(http.StatusUnprocessableEntity, map[string]any{"status": "error", "errorType": "execution", "error": "query timed out"})
		return
	}
	switch r.URL.Path {
	case "/api/v1/query":
		ts := float64(time.Now().UnixMilli()) / 1000
		switch q {
		case `lane_active_workers{lane="tax"}`:
			reply(200, map[string]any{"status": "success", "warnings": []string{"partial data"}, "data": map[string]any{
				"resultType": "vector",
				"result": []any{
					map[string]any{"metric": map[string]string{"__name__": "lane_active_workers", "lane": "tax", "pod": "p-1"}, "value": []any{ts, "4"}},
					map[string]any{"metric": map[string]string{"__name__": "lane_active_workers", "lane": "tax", "pod": "p-2"}, "value": []any{ts, "2.5"}},
				},
			}})
		case "scalar(1)":
			reply(200, map[string]any{"status": "success", "data": map[string]any{"resultType": "scalar", "result": []any{ts, "1"}}})
		case "up[1m]":
			reply(200, map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": []any{}}})
		default:
			reply(http.StatusBadRequest, map[string]any{"status": "error", "errorType": "bad_data", "error": "parse error"})
		}
	case "/api/v1/query_range":
		start, _ := strconv.ParseFloat(r.Form.Get("start"), 64)
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		vals := []any{}
		for i := range 3 {
			vals = append(vals, []any{start + float64(i)*step, fmt.Sprint(i * 10)})
		}
		reply(200, map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": []any{
			map[string]any{"metric": map[string]string{"job": "gw"}, "values": vals},
		}}})
	default:
		http.NotFound(w, r)
	}
}

func TestPromQLQueryOnce(t *testing.T) {
	srv := httptest.NewServer(&fakeProm{t: t})
	defer srv.Close()
	tests := []struct {
		query   string
		want    []string // "labels value"
		wantErr string
	}{
		{query: `lane_active_workers{lane="tax"}`, want: []string{"lane=tax,pod=p-1 4", "lane=tax,pod=p-2 2.5"}},
		{query: "scalar(1)", want: []string{" 1"}},
		{query: "up[1m]", wantErr: "result type matrix, want vector or scalar"},
		{query: "bad(", wantErr: "parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q := &PromQL{Name: "workers", URL: srv.URL, Query: tt.query, Clock: event.NewClock(), Sink: newCollect()}
			evs, _, err := q.QueryOnce(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
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
				got = append(got, labelString(e.Labels)+" "+fmt.Sprint(e.Value))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func labelString(l map[string]string) string {
	var parts []string
	for _, k := range []string{"__name__", "job", "lane", "pod"} {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

func TestPromQLRunNotesErrorsAndWarnings(t *testing.T) {
	fp := &fakeProm{t: t}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	sink := newCollect()
	q := &PromQL{Name: "workers", URL: srv.URL, Query: `lane_active_workers{lane="tax"}`, Interval: 20 * time.Millisecond, Clock: event.NewClock(), Sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Run(ctx) }()
	sink.waitFor(t, "two rounds", func(ev []event.Event) bool {
		return count(ev, func(e event.Event) bool { return e.Kind == event.Metric }) >= 4
	})
	fp.fail.Store(true)
	sink.waitFor(t, "error note", func(ev []event.Event) bool {
		return count(ev, func(e event.Event) bool { return e.Kind == event.Note && strings.Contains(e.Detail, "query timed out") }) >= 1
	})
	time.Sleep(150 * time.Millisecond) // several more failing rounds
	cancel()
	<-done
	ev := sink.snapshot()
	if c := count(ev, func(e event.Event) bool { return e.Kind == event.Note && strings.Contains(e.Detail, "query timed out") }); c != 1 {
		t.Errorf("%d error notes, want 1 (repeats folded):\n%s", c, dump(ev))
	}
	if c := count(ev, func(e event.Event) bool {
		return e.Kind == event.Note && strings.Contains(e.Detail, "warning: partial data")
	}); c != 1 {
		t.Errorf("%d warning notes, want 1:\n%s", c, dump(ev))
	}
}

func TestQueryRange(t *testing.T) {
	srv := httptest.NewServer(&fakeProm{t: t})
	defer srv.Close()
	a, err := NewPromAPI(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := event.NewClockAt(time.Unix(1_800_000_000, 0))
	evs, err := QueryRange(context.Background(), a, clock, "up", "up", 10*time.Second, 40*time.Second, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %s=%v %s", e.At, e.Metric, e.Value, labelString(e.Labels)))
	}
	want := "10s up=0 job=gw|25s up=10 job=gw|40s up=20 job=gw"
	if strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
	if _, err := QueryRange(context.Background(), a, clock, "up", "up", 10*time.Second, 5*time.Second, time.Second); err == nil {
		t.Error("inverted window accepted")
	}
}
