package localenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drillhq/drill/internal/event"
)

func newTestProxy(tb testing.TB, log *event.Log, backends ...string) *Proxy {
	tb.Helper()
	p, err := NewProxy("bench", "", PerRequest, event.NewClock(), log, "", nil)
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

// TestProxyForwards: the lean path and the ReverseProxy path give the
// backend the same request (method, path, query, Host, headers without
// hop-by-hop and forwarding ones, no added User-Agent) and the client the
// same answer (status, headers without hop-by-hop ones, body, trailers).
func TestProxyForwards(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Seen", fmt.Sprintf("%s %s %s ua=%q xff=%q a=%q up=%q body=%s",
			r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("User-Agent"), r.Header.Get("X-Forwarded-For"),
			r.Header.Get("X-A"), r.Header.Get("Upgrade"), b))
		w.Header().Set("Trailer", "X-Sum")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "answer")
		w.Header().Set("X-Sum", "42")
	}))
	defer backend.Close()
	p := newTestProxy(t, &event.Log{}, backend.URL)
	tests := []struct {
		name   string
		header map[string]string
		body   string
		want   string
	}{
		{"lean", map[string]string{"X-A": "1"}, `{"id":1}`, `POST /o?x=1&y=2 svc.local ua="" xff="" a="1" up="" body={"id":1}`},
		{"empty body", map[string]string{"X-A": "2"}, "", `POST /o?x=1&y=2 svc.local ua="" xff="" a="2" up="" body=`},
		{"forwarded headers (ReverseProxy path)", map[string]string{"X-A": "3", "X-Forwarded-For": "10.0.0.1"}, "b", `POST /o?x=1&y=2 svc.local ua="" xff="" a="3" up="" body=b`},
		{"user agent kept", map[string]string{"User-Agent": "drill-test", "X-A": "4"}, "", `POST /o?x=1&y=2 svc.local ua="drill-test" xff="" a="4" up="" body=`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, p.URL()+"/o?x=1&y=2", strings.NewReader(tt.body))
			req.Host = "svc.local"
			req.Header.Set("User-Agent", "")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusAccepted || string(b) != "answer" {
				t.Errorf("got %d %q, want 202 answer", res.StatusCode, b)
			}
			if got := res.Header.Get("X-Seen"); got != tt.want {
				t.Errorf("backend saw\n%s\nwant\n%s", got, tt.want)
			}
			if res.Header.Get("X-Hop") != "" || res.Header.Get("Keep-Alive") != "" {
				t.Errorf("hop-by-hop headers reached the client: %v", res.Header)
			}
			if got := res.Trailer.Get("X-Sum"); got != "42" {
				t.Errorf("trailer X-Sum %q, want 42", got)
			}
		})
	}
}

// TestPlainRequest: which requests take the lean path.
func TestPlainRequest(t *testing.T) {
	mk := func(body string, h ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/o?x=1", strings.NewReader(body))
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		if body != "" {
			b := []byte(body)
			r.Body = &bufferedBody{Reader: bytes.NewReader(b), b: b}
		}
		return r
	}
	streamed := mk("")
	streamed.ContentLength, streamed.Body = -1, io.NopCloser(strings.NewReader("x"))
	semicolon := mk("")
	semicolon.URL.RawQuery = "a=1;b=2"
	tests := []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"buffered body", mk(`{"id":1}`, "Content-Type", "application/json"), true},
		{"no body", mk(""), true},
		{"streamed body", streamed, false},
		{"upgrade", mk("", "Connection", "Upgrade", "Upgrade", "websocket"), false},
		{"expect", mk("", "Expect", "100-continue"), false},
		{"x-forwarded-for", mk("", "X-Forwarded-For", "10.0.0.1"), false},
		{"te", mk("", "Te", "trailers"), false},
		{"semicolon query", semicolon, false},
	}
	for _, tt := range tests {
		if got := plainRequest(tt.r); got != tt.want {
			t.Errorf("%s: plainRequest %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestProxyRoundTripVia: the in-process path answers as the listener does
// (status, X-Drill-Proxy reason, body, backend reached, Host header) for
// no endpoints, two ready backends in turn, and a backend that refuses;
// a request whose context ended gets an error, not an answer.
func TestProxyRoundTripVia(t *testing.T) {
	backend := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s host=%s", name, r.Host)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	tests := []struct {
		name      string
		endpoints []string // "" entries are not added
		want      []string // "status reason body-prefix" per request, in order
	}{
		{"no endpoints", nil, []string{"503 no-endpoints no ready endpoints for service svc"}},
		{"round robin", []string{backend("a"), backend("b")}, []string{
			"200  a host=SVC", "200  b host=SVC", "200  a host=SVC",
		}},
		{"backend refuses", []string{refused()}, []string{"502 backend-error service svc: pod svc-0:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			answers := map[string][]string{}
			for _, via := range []string{"listener", "in-process"} {
				p, err := NewProxy("svc", "", PerRequest, event.NewClock(), nil, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close(context.Background())
				for i, addr := range tc.endpoints {
					p.SetEndpoint(fmt.Sprintf("svc-%d", i), addr, i, true)
				}
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				for range tc.want {
					req, _ := http.NewRequest("GET", p.URL()+"/x", nil)
					var res *http.Response
					if via == "listener" {
						res, err = tr.RoundTrip(req)
					} else {
						res, err = p.RoundTripVia(tr, req)
					}
					if err != nil {
						t.Fatalf("%s: %v", via, err)
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					got := fmt.Sprintf("%d %s %s", res.StatusCode, res.Header.Get("X-Drill-Proxy"),
						strings.ReplaceAll(string(body), p.Addr(), "SVC"))
					answers[via] = append(answers[via], got)
				}
			}
			for via, got := range answers {
				for i, w := range tc.want {
					if !strings.HasPrefix(got[i], w) {
						t.Errorf("%s answer %d = %q, want prefix %q", via, i, got[i], w)
					}
				}
			}
		})
	}

	t.Run("context ended", func(t *testing.T) {
		p, err := NewProxy("svc", "", PerRequest, event.NewClock(), nil, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		p.SetEndpoint("svc-0", backend("a"), 0, true)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", p.URL()+"/x", nil)
		if res, err := p.RoundTripVia(&http.Transport{}, req); err == nil {
			res.Body.Close()
			t.Fatalf("answer %d for a cancelled request, want an error", res.StatusCode)
		}
	})

	// A transport that times out its own connections (drill's lean
	// generator transport) gave up: its error is the caller's, not a 502.
	t.Run("connection deadline passed", func(t *testing.T) {
		p, err := NewProxy("svc", "", PerRequest, event.NewClock(), nil, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		p.SetEndpoint("svc-0", backend("a"), 0, true)
		req, _ := http.NewRequest("GET", p.URL()+"/x", nil)
		timedOut := roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		})
		res, err := p.RoundTripVia(timedOut, req)
		if err == nil {
			res.Body.Close()
			t.Fatalf("answer %d for a request whose deadline passed, want its error", res.StatusCode)
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("error %v, want the transport's deadline error", err)
		}
	})
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
