// Package refservicestest holds test helpers for the reference services: run a
// service on a loopback HTTP server, put an embedded Toxiproxy proxy in
// front of PostgreSQL and pause it, and poll endpoints. Everything started
// is stopped in t.Cleanup. Only tests import it.
package refservicestest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/drillhq/drill/internal/refservices"
)

// Run serves svc on a loopback httptest server, starts its background work
// and returns the base URL. Cleanup stops the work, the server and svc.
func Run(tb testing.TB, svc refservices.Service) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(svc.Handler())
	svc.Start(ctx)
	tb.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
		svc.Close()
	})
	return srv.URL
}

// Proxy is an embedded Toxiproxy proxy in front of one upstream.
type Proxy struct {
	p *toxiproxy.Proxy
}

// Toxiproxy starts an in-process Toxiproxy proxy on 127.0.0.1 in front of
// upstream (host:port) and removes it in cleanup.
func Toxiproxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	zerolog.SetGlobalLevel(zerolog.WarnLevel) // toxics log through the global logger
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		tb.Fatalf("start toxiproxy proxy: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Collection.Clear() })
	return &Proxy{p: p}
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.p.Listen }

// DSN rewrites dsn (a postgres:// URL) to go through the proxy.
func (p *Proxy) DSN(tb testing.TB, dsn string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("parse dsn: %v", err)
	}
	u.Host = p.Addr()
	return u.String()
}

// Pause black-holes both directions (timeout toxic with timeout 0): the
// database "pause" of the INC-3119 drill. Existing and new connections
// hang until [Proxy.Resume], which closes them.
func (p *Proxy) Pause(tb testing.TB) {
	tb.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		body := fmt.Sprintf(`{"name":"pause_%s","type":"timeout","stream":%q,"toxicity":1.0,"attributes":{"timeout":0}}`, stream, stream)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			tb.Fatalf("add timeout toxic: %v", err)
		}
	}
}

// Latency delays each chunk on stream ("upstream" or "downstream") by ms.
func (p *Proxy) Latency(tb testing.TB, stream string, ms int) {
	tb.Helper()
	body := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"toxicity":1.0,"attributes":{"latency":%d}}`, stream, stream, ms)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		tb.Fatalf("add latency toxic: %v", err)
	}
}

// Resume removes every toxic.
func (p *Proxy) Resume(tb testing.TB) {
	tb.Helper()
	done := make(chan struct{})
	go func() { p.p.Toxics.ResetToxics(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		tb.Fatalf("remove toxics: still not done after 10s")
	}
}

// Response is what [Do] got.
type Response struct {
	Status  int
	Header  http.Header
	Body    string
	Elapsed time.Duration
	Err     error // transport error or timeout; Status is 0 then
}

// Do sends method url with body (JSON when non-empty) and a client timeout.
func Do(method, url, body string, timeout time.Duration, header ...string) Response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return Response{Err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Timeout: timeout}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return Response{Err: err, Elapsed: time.Since(t0)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Elapsed: time.Since(t0), Err: err}
}

// DoAll sends n copies of the same request at once (as [Do]) and returns
// every response when all have ended, in no particular order.
func DoAll(n int, method, url, body string, timeout time.Duration, header ...string) []Response {
	out := make([]Response, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = Do(method, url, body, timeout, header...) })
	}
	wg.Wait()
	return out
}

// WaitStatus polls GET url (1 s client timeout) until it answers want, or
// fails the test after within, naming the last answer.
func WaitStatus(tb testing.TB, url string, want int, within time.Duration) Response {
	tb.Helper()
	deadline := time.Now().Add(within)
	var last Response
	for {
		last = Do(http.MethodGet, url, "", time.Second)
		if last.Status == want {
			return last
		}
		if time.Now().After(deadline) {
			tb.Fatalf("GET %s: want %d within %s; last: status %d body %q err %v", url, want, within, last.Status, last.Body, last.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
