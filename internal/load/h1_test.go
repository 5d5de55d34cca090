package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// newTestH1 is an h1Transport as Engine.prepare builds one, dialling directly.
func newTestH1(keepAlive bool) *h1Transport {
	return &h1Transport{
		dial:        (&net.Dialer{}).DialContext,
		keepAlive:   keepAlive,
		maxIdle:     100,
		idleTimeout: 90 * time.Second,
		bufSize:     connBufferSize,
	}
}

// countingServer is an httptest server that counts the connections
// opened to it and closed.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	cs.Server = httptest.NewUnstartedServer(h)
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			cs.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cs.closed.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

// send makes one request through rt as vegeta does (reads the body to its
// end, closes it) and returns the status and body.
func send(rt http.RoundTripper, method, url, body string) (int, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, "", err
	}
	res, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// TestH1Exchanges: answers of every framing come back whole, and the
// connection is kept alive exactly when net/http's Transport would keep
// it.
func TestH1Exchanges(t *testing.T) {
	tests := []struct {
		name      string
		keepAlive bool
		method    string
		handler   http.HandlerFunc
		status    int
		body      string
		conns     int32 // opened for 3 requests one after another
	}{
		{"length-delimited", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "hello")
		}, 200, "hello", 1},
		{"chunked", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "hel")
			w.(http.Flusher).Flush()
			fmt.Fprint(w, "lo")
		}, 200, "hello", 1},
		{"chunked with a trailer", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Sum")
			fmt.Fprint(w, "hel")
			w.(http.Flusher).Flush()
			fmt.Fprint(w, "lo")
			w.Header().Set("X-Sum", "5")
		}, 200, "hello", 1},
		{"server says close", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, "bye")
		}, 200, "bye", 3},
		{"no content", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}, 204, "", 1},
		{"early hints first", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			fmt.Fprint(w, "final")
		}, 200, "final", 1},
		{"HEAD", true, "HEAD", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
		}, 200, "", 1},
		{"POST body echoed", true, "POST", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(w, r.Body)
		}, 200, "payload", 1},
		{"503 with Retry-After", true, "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "shed", http.StatusServiceUnavailable)
		}, 503, "shed\n", 1},
		{"keep-alive off", false, "GET", func(w http.ResponseWriter, r *http.Request) {
			if !r.Close {
				http.Error(w, "want Connection: close", http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, "hello")
		}, 200, "hello", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newCountingServer(t, tc.handler)
			h1 := newTestH1(tc.keepAlive)
			defer h1.CloseIdleConnections()
			body := ""
			if tc.method == "POST" {
				body = "payload"
			}
			for i := range 3 {
				status, got, err := send(h1, tc.method, srv.URL+"/x", body)
				if err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				if status != tc.status || got != tc.body {
					t.Fatalf("request %d: %d %q, want %d %q", i+1, status, got, tc.status, tc.body)
				}
			}
			if n := srv.opened.Load(); n != tc.conns {
				t.Fatalf("%d connections opened for 3 requests, want %d", n, tc.conns)
			}
		})
	}
}

// rawServer accepts connections on loopback and hands each to serve in
// its own goroutine; it returns the address.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// readRequest reads one request (head and body) from br.
func readRequest(br *bufio.Reader) error {
	r, err := http.ReadRequest(br)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r.Body)
	return err
}

// TestH1CloseDelimitedBody: a body that ends when the server closes (no
// length, not chunked) is read whole, and its connection is not reused.
func TestH1CloseDelimitedBody(t *testing.T) {
	var conns atomic.Int32
	addr := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		if readRequest(bufio.NewReader(c)) != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
	})
	h1 := newTestH1(true)
	defer h1.CloseIdleConnections()
	for i := range 2 {
		status, body, err := send(h1, "GET", "http://"+addr+"/", "")
		if err != nil || status != 200 || body != "until close" {
			t.Fatalf("request %d: %d %q %v, want 200 \"until close\"", i+1, status, body, err)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections for 2 requests, want 2", n)
	}
}

// TestH1IdleClosedByServer: a kept-alive connection the server closed
// while it was idle is not used for the next request, which succeeds on
// a new connection; that holds for a POST, which may not be sent twice.
func TestH1IdleClosedByServer(t *testing.T) {
	closed := make(chan struct{}, 4)
	var conns atomic.Int32
	addr := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		defer func() {
			c.Close() // before telling the test
			closed <- struct{}{}
		}()
		if readRequest(bufio.NewReader(c)) != nil {
			return
		}
		// Keep-alive on the wire, then the server's idle timeout.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	h1 := newTestH1(true)
	defer h1.CloseIdleConnections()
	for i := range 3 {
		status, body, err := send(h1, "POST", "http://"+addr+"/", "order")
		if err != nil || status != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q %v, want 200 \"ok\"", i+1, status, body, err)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not close its connection")
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 3 requests, want 3", n)
	}
}

// TestH1ConnAlive: the peek tells an open, quiet connection from one the
// peer closed or wrote to unasked.
func TestH1ConnAlive(t *testing.T) {
	for _, tc := range []struct {
		name string
		peer func(net.Conn)
		want bool
	}{
		{"quiet", func(net.Conn) {}, true},
		{"closed", func(c net.Conn) { c.Close() }, false},
		{"unasked bytes", func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\n\r\n") }, false},
		{"reset", func(c net.Conn) { _ = c.(*net.TCPConn).SetLinger(0); c.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			tc.peer(peer)
			// What the peer did reaches c's socket shortly: wait for it by
			// polling, with a generous bound.
			got := connAlive(c)
			for end := time.Now().Add(5 * time.Second); got != tc.want && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
				got = connAlive(c)
			}
			if got != tc.want {
				t.Fatalf("connAlive %v, want %v", got, tc.want)
			}
		})
	}
}

// TestH1Timeout: a request whose deadline (carried in its dialState, with
// no timer in its context) passes while the server holds it ends with a
// timeout that classify calls a timeout, and its connection is closed.
func TestH1Timeout(t *testing.T) {
	released := make(chan struct{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the client's connection closes
		close(released)
	})
	h1 := newTestH1(true)
	defer h1.CloseIdleConnections()
	ds := &dialState{deadline: time.Now().Add(200 * time.Millisecond)}
	ctx := context.WithValue(context.Background(), dialStateKey{}, ds)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/hold", nil)
	start := time.Now()
	res, err := h1.RoundTrip(req)
	if err == nil {
		res.Body.Close()
		t.Fatalf("answer %d, want a timeout", res.StatusCode)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("ended after %s, before the 200ms deadline", took)
	}
	if !isTimeout(err) || classify(err.Error()) != measure.ErrTimeout {
		t.Fatalf("error %q (kind %s), want a timeout", err, classify(err.Error()))
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still holds the request: the connection was not closed")
	}
}

// TestH1CanResend: net/http's rule for sending a request again after a
// kept-alive connection failed under it.
func TestH1CanResend(t *testing.T) {
	eof := fmt.Errorf("read response: %w", io.ErrUnexpectedEOF)
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	post := func(h string) *http.Request {
		r, _ := http.NewRequest("POST", "http://x/", strings.NewReader("b"))
		if h != "" {
			r.Header.Set(h, "k1")
		}
		return r
	}
	get, _ := http.NewRequest("GET", "http://x/", nil)
	unrewindable := post("")
	unrewindable.GetBody = nil
	for _, tc := range []struct {
		name  string
		req   *http.Request
		wrote bool
		err   error
		want  bool
	}{
		{"GET, closed before the answer", get, true, eof, true},
		{"GET, timed out", get, true, timeout, false},
		{"POST, nothing written", post(""), false, eof, true},
		{"POST, written, closed before the answer", post(""), true, eof, false},
		{"POST with Idempotency-Key", post("Idempotency-Key"), true, eof, true},
		{"body that cannot be read again", unrewindable, false, eof, false},
	} {
		if got := canResend(tc.req, tc.wrote, tc.err); got != tc.want {
			t.Errorf("%s: canResend %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAcquireDeadline: a dial waiting for a slot past its request's
// deadline ends as a dial timeout.
func TestAcquireDeadline(t *testing.T) {
	sem := make(chan struct{}, 1)
	if err := acquire(context.Background(), sem, "tcp", time.Time{}); err != nil {
		t.Fatalf("free slot: %v", err)
	}
	err := acquire(context.Background(), sem, "tcp", time.Now().Add(50*time.Millisecond))
	if err == nil || !isTimeout(err) || !strings.Contains(err.Error(), "dial tcp") {
		t.Fatalf("error %v, want a dial timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := acquire(ctx, sem, "tcp", time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// TestH1Concurrent: many workers share the pool; every request is
// answered, no connection serves two requests at once (the server
// would see interleaved bytes), and no more connections open than
// workers.
func TestH1Concurrent(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	h1 := newTestH1(true)
	const workers, each = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				want := fmt.Sprintf("w%d-%d", w, i)
				status, got, err := send(h1, "POST", srv.URL+"/echo", want)
				if err != nil || status != 200 || got != want {
					errs <- fmt.Errorf("worker %d request %d: %d %q %v, want 200 %q", w, i, status, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := srv.opened.Load(); n > workers {
		t.Fatalf("%d connections opened for %d workers", n, workers)
	}
	h1.CloseIdleConnections()
	opened := srv.opened.Load()
	for end := time.Now().Add(10 * time.Second); srv.closed.Load() < opened && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if c := srv.closed.Load(); c != opened {
		t.Fatalf("%d of %d connections closed after CloseIdleConnections", c, opened)
	}
}
