package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// TestServiceAnswersCountedApart: behind drill's local Service, the 503s
// the Service answers itself (no ready endpoint) are counted apart from
// the 503s a replica sheds, by the marker on each answer, through the
// Service's listener and through its in-process router alike: they are in
// the bucket's ServiceAnswers, not in its shed histogram, Retry-After count
// or ShedCount. The replica is a real HTTP server that sheds every request
// with 503 and Retry-After, and relays a downstream Service's marker on it
// (a gateway passing its dependency's answer on): its answer is still its
// own. Once the replica has answered 15 requests of each stream it leaves
// the Service's ready set, so every later request is the Service's.
func TestServiceAnswersCountedApart(t *testing.T) {
	clock := event.NewClock()
	proxy, err := localenv.NewProxy("svc", "", localenv.PerRequest, clock, nil, "", testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = proxy.Close(ctx)
	})
	const routedHost = "svc.invalid:80"
	var (
		mu      sync.Mutex
		byHost  = map[string]int64{} // the replica's own answers per Host
		flipped bool
	)
	var addr string
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byHost[r.Host]++
		if !flipped && byHost[routedHost] >= 15 && byHost[proxy.Addr()] >= 15 {
			flipped = true
			proxy.SetEndpoint("svc-0", addr, 0, false) // no ready endpoint from now on
		}
		mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.Header().Set(measure.ServiceAnswerHeader, "no-endpoints")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shedding\n"))
	}))
	defer replica.Close()
	addr = strings.TrimPrefix(replica.URL, "http://")
	proxy.SetEndpoint("svc-0", addr, 0, true)

	stream := func(name, url string) scenario.Stream {
		return scenario.Stream{Name: name, Rate: rate(60, time.Second), Duration: dur(2 * time.Second), LagBudget: relaxed,
			Targets: []scenario.Target{{Method: "GET", URL: url}}}
	}
	e := runStreams(t, clock, Options{Routers: map[string]Router{routedHost: proxy}},
		stream("listener", proxy.URL()+"/x"), stream("routed", "http://"+routedHost+"/x"))

	mu.Lock()
	defer mu.Unlock()
	if !flipped {
		t.Fatalf("the replica never left the ready set (its answers: %v)", byHost)
	}
	for name, host := range map[string]string{"listener": proxy.Addr(), "routed": routedHost} {
		tot := e.Series()[name].Total()
		own := byHost[host]
		byService := tot.ServiceAnswers[503]
		if tot.Requests == 0 || tot.Codes[503] != tot.Requests {
			t.Errorf("%s: %d requests, %d answered 503; want all", name, tot.Requests, tot.Codes[503])
		}
		if own == 0 || byService == 0 {
			t.Errorf("%s: the replica shed %d, the Service answered %d: want both", name, own, byService)
		}
		if byService != tot.Requests-own || len(tot.ServiceAnswers) != 1 || !tot.ServiceAnswersCounted {
			t.Errorf("%s: ServiceAnswers %v (counted %t), want 503: %d (%d requests, %d shed by the replica)",
				name, tot.ServiceAnswers, tot.ServiceAnswersCounted, tot.Requests-own, tot.Requests, own)
		}
		if n := tot.ShedCount(); n != own {
			t.Errorf("%s: ShedCount %d, want the replica's %d", name, n, own)
		}
		if n := tot.Shed.TotalCount(); n != own {
			t.Errorf("%s: shed histogram holds %d, want the replica's %d", name, n, own)
		}
		if tot.ShedRetryAfter != own {
			t.Errorf("%s: ShedRetryAfter %d, want the replica's %d", name, tot.ShedRetryAfter, own)
		}
	}
}

// TestRecordReadsMarkerWithoutAllocating: reading the local Service's
// marker off a response costs the recording no allocation (a lookup in the
// header map the transport already parsed), for answers with and without
// it, once the second's bucket exists.
func TestRecordReadsMarkerWithoutAllocating(t *testing.T) {
	s := &stream{clock: event.NewClock(), rec: newRecorder(time.Second, 0)}
	s.budget.LateAfter = time.Hour
	at := s.clock.Start().Add(100 * time.Millisecond)
	byService := &vegeta.Result{Code: 503, Timestamp: at, Latency: time.Millisecond,
		Headers: http.Header{measure.ServiceAnswerHeader: {"no-endpoints"}}}
	shed := &vegeta.Result{Code: 503, Timestamp: at, Latency: time.Millisecond,
		Headers: http.Header{"Retry-After": {"1"}}}
	s.record(byService) // the bucket and its maps exist from here on
	s.record(shed)
	if n := testing.AllocsPerRun(200, func() { s.record(byService); s.record(shed) }); n != 0 {
		t.Errorf("%v allocations per pair of recorded answers, want 0", n)
	}
	var b *measure.Bucket
	s.rec.all(func(m *measure.Bucket) { b = m.Clone() })
	if b.Codes[503] != b.Requests || b.ServiceAnswers[503] != b.Requests/2 || b.ShedCount() != b.Requests/2 ||
		b.ShedRetryAfter != b.Requests/2 || b.Shed.TotalCount() != b.Requests/2 {
		t.Errorf("%d requests: 503 %d, by the Service %d, shed %d (Retry-After %d, histogram %d); want half each",
			b.Requests, b.Codes[503], b.ServiceAnswers[503], b.ShedCount(), b.ShedRetryAfter, b.Shed.TotalCount())
	}
}
