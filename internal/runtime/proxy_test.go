package runtime

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/event"
)

func newTestProxy(tb testing.TB, log *event.Log, backends ...string) *Proxy {
	tb.Helper()
	p, err := NewProxy("bench", "", event.NewClock(), log, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	for i, b := range backends {
		p.SetEndpoint("bench-"+string(rune('0'+i)), strings.TrimPrefix(b, "http://"), i, true)
	}
	return p
}

// TestProxyEvents: endpoint events only on changes, in order, and
// EndpointRemoved for every endpoint on Close.
func TestProxyEvents(t *testing.T) {
	log := &event.Log{}
	p := newTestProxy(t, log)
	p.SetEndpoint("a", "127.0.0.1:1", 0, false) // new and unready: no event
	p.SetEndpoint("a", "127.0.0.1:1", 0, true)
	p.SetEndpoint("a", "127.0.0.1:1", 0, true) // no change
	p.SetEndpoint("b", "127.0.0.1:2", 1, true)
	p.SetEndpoint("a", "127.0.0.1:1", 0, false)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.SetEndpoint("a", "127.0.0.1:1", 0, true) // after Close: nothing
	var got []string
	for _, e := range log.Events() {
		got = append(got, string(e.Kind)+" "+e.Pod+" "+e.Address)
	}
	want := []string{
		"endpoint-ready a 127.0.0.1:1", "endpoint-ready b 127.0.0.1:2", "endpoint-not-ready a 127.0.0.1:1",
		"endpoint-removed a 127.0.0.1:1", "endpoint-removed b 127.0.0.1:2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkProxy measures requests through the proxy to two backends
// (compare with BenchmarkDirect for the proxy's own cost).
func BenchmarkProxy(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	b1, b2 := httptest.NewServer(h), httptest.NewServer(h)
	defer b1.Close()
	defer b2.Close()
	p := newTestProxy(b, &event.Log{}, b1.URL, b2.URL)
	benchGet(b, p.URL())
}

// BenchmarkDirect is the baseline: the same client straight to a backend.
func BenchmarkDirect(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	defer srv.Close()
	benchGet(b, srv.URL)
}

func benchGet(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Get(url + "/")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}
