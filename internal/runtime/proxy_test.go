package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestProxyRequestBodies: bodies of known length (read whole by the proxy)
// and streamed ones both reach the backend intact with their length, and a
// client that sends less than it announced gets no backend call.
func TestProxyRequestBodies(t *testing.T) {
	var calls atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%d %q %s", r.ContentLength, b, r.Header.Get("Content-Type"))
	}))
	defer backend.Close()
	p := newTestProxy(t, &event.Log{}, backend.URL)
	big := strings.Repeat("x", maxBufferedBody+1)
	tests := []struct {
		name string
		body io.Reader
		want string
	}{
		{"known length", strings.NewReader(`{"id":"1"}`), `10 "{\"id\":\"1\"}" application/json`},
		{"over the buffer limit", strings.NewReader(big), fmt.Sprintf("%d %q application/json", len(big), big)},
		{"streamed", io.MultiReader(strings.NewReader(`{"id":`), strings.NewReader(`"2"}`)), `-1 "{\"id\":\"2\"}" application/json`},
		{"empty", nil, `0 "" application/json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := http.Post(p.URL()+"/orders", "application/json", tt.body)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || string(b) != tt.want {
				t.Errorf("got %d %s\nwant 200 %s", res.StatusCode, b, tt.want)
			}
		})
	}

	t.Run("short body", func(t *testing.T) {
		before := calls.Load()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"id\":")
		_ = c.(*net.TCPConn).CloseWrite()
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400 or no answer", res.StatusCode)
			}
		}
		if n := calls.Load() - before; n != 0 {
			t.Errorf("backend called %d times for a short body", n)
		}
	})
}
