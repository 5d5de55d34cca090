package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// h1Transport is the generator's HTTP/1.1 client for plain-HTTP targets.
// A request is written, and its response read, in the goroutine that
// sends it (a vegeta worker), on a connection that request holds alone
// until its body is closed; the request's deadline (see
// dialState.deadline) is set on that connection, so a request that times
// out ends by itself, with neither a timer's goroutine nor a cancel.
//
// net/http's Transport starts three goroutines for every connection (the
// dial, a read loop and a write loop) and hands every request between
// them and its caller, and its context timeout starts one more when it
// fires. That is negligible while connections are kept alive; but a fault
// that holds every request makes the generator open a connection for
// nearly every request, thousands a second, exactly when the machine is
// busiest, and on small VMs those hand-offs were where the pacer's hits
// waited (BENCHMARKS, "a runtime trace of the pause's onset").
//
// What it keeps of net/http's client behaviour: the request bytes
// (Request.Write: Host, User-Agent, Content-Length or chunked, Connection:
// close when the request asks it), the response parsing (ReadResponse:
// 1xx answers skipped, chunked and length-delimited bodies, trailers),
// keep-alive with the freshest idle connection reused first, at most
// maxIdle idle connections per address and none older than idleTimeout,
// and the same retry of a request that met a kept-alive connection the
// server had already closed. An idle connection is checked before reuse
// (a non-blocking peek): one the server closed, or that holds unasked-for
// bytes, is dropped, as net/http's read loop would have dropped it.
//
// It is used for http:// URLs of streams without maxConnections (see
// Engine.prepare); https and the per-host connection cap stay with net/http.
// Safe for concurrent use.
type h1Transport struct {
	// dial opens a connection to addr (host:port); it honours ctx and the
	// request deadline that ctx carries.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// keepAlive reuses connections; false sends Connection: close.
	keepAlive bool
	// maxIdle is the number of idle connections kept per address.
	maxIdle int
	// idleTimeout closes an idle connection older than this instead of
	// reusing it.
	idleTimeout time.Duration
	// bufSize is each connection's read and write buffer size (bytes).
	bufSize int

	mu   sync.Mutex
	idle map[string][]*h1Conn // per address, oldest first
}

// h1Conn is one connection of an h1Transport with its buffers.
type h1Conn struct {
	conn   net.Conn
	cw     countingWriter // counts what each request wrote to conn
	br     *bufio.Reader
	bw     *bufio.Writer // writes to cw
	addr   string
	idleAt time.Time // when it was last put back
	reused bool      // taken from the idle pool for the current request
}

// max1xx is the number of informational (1xx) answers read before a
// request's final answer, as net/http's Transport allows by default.
const max1xx = 5

// errTooMany1xx ends a request whose server sent more than max1xx
// informational answers.
var errTooMany1xx = errors.New("too many 1xx informational responses")

// RoundTrip sends req and reads its response head; the body is read by
// the caller and, once read to its end and closed, frees the connection
// for the next request. Errors: the dial's, the write's or the read's (a
// timeout is a net.Error with Timeout() true whose text holds "i/o
// timeout"), or a protocol error from reading the response head.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline := requestDeadline(req.Context())
	addr := canonicalAddr(req.URL)
	if !t.keepAlive && !req.Close {
		r := *req
		r.Close = true
		req = &r
	}
	for attempt := 1; ; attempt++ {
		c, err := t.get(req.Context(), addr, deadline)
		if err != nil {
			closeRequestBody(req)
			return nil, err
		}
		resp, wrote, err := t.exchange(c, req, deadline)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
		if attempt > 1 || !c.reused || !canResend(req, wrote, err) {
			return nil, err
		}
		// The server closed this kept-alive connection before our request
		// reached it: send it once more on a new connection, as net/http's
		// Transport does.
		if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			b, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			r := *req
			r.Body = b
			req = &r
		}
	}
}

// exchange writes req on c and reads the response head. wrote reports
// whether any byte of the request reached the connection. On error the
// caller closes c.
func (t *h1Transport) exchange(c *h1Conn, req *http.Request, deadline time.Time) (resp *http.Response, wrote bool, err error) {
	// A zero deadline clears the one the previous request set.
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	c.cw.n = 0
	if err := req.Write(c.bw); err != nil {
		return nil, c.cw.n > 0, fmt.Errorf("write request: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return nil, c.cw.n > 0, fmt.Errorf("write request: %w", err)
	}
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return nil, true, fmt.Errorf("read response: %w", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if n == max1xx {
			return nil, true, errTooMany1xx
		}
	}
	b := &h1Body{t: t, c: c, body: resp.Body}
	b.reuse = t.keepAlive && !req.Close && !resp.Close &&
		resp.StatusCode != http.StatusSwitchingProtocols && delimited(resp)
	if resp.Body == http.NoBody {
		b.eof = true
	}
	resp.Body = b
	return resp, true, nil
}

// delimited reports whether resp's body ends without the connection
// closing: empty, length-delimited or chunked.
func delimited(resp *http.Response) bool {
	if resp.Body == http.NoBody || resp.ContentLength >= 0 {
		return true
	}
	for _, te := range resp.TransferEncoding {
		if strings.EqualFold(te, "chunked") {
			return true
		}
	}
	return false
}

// canResend reports whether a request that failed with err on a reused
// connection may be sent again, by net/http's rule: nothing of it was
// written, or it is replayable (an idempotent method, or an idempotency
// key, with a body that can be read again) and the failure is the
// connection closing before any answer.
func canResend(req *http.Request, wrote bool, err error) bool {
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if !rewindable {
		return false
	}
	if !wrote {
		return true
	}
	if !closedBeforeAnswer(err) {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// closedBeforeAnswer reports whether err is the connection ending (EOF or
// a reset) before a response head arrived, rather than a timeout.
func closedBeforeAnswer(err error) bool {
	if isTimeout(err) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset")
}

// get returns a connection to addr: the freshest live idle one, else a
// new one.
func (t *h1Transport) get(ctx context.Context, addr string, deadline time.Time) (*h1Conn, error) {
	for {
		c := t.popIdle(addr)
		if c == nil {
			break
		}
		// Bytes already buffered were never asked for: the connection is
		// out of step with its server.
		if (t.idleTimeout > 0 && time.Since(c.idleAt) > t.idleTimeout) || c.br.Buffered() > 0 || !connAlive(c.conn) {
			c.conn.Close()
			continue
		}
		c.reused = true
		return c, nil
	}
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h1Conn{conn: conn, cw: countingWriter{w: conn}, addr: addr}
	c.br = bufio.NewReaderSize(conn, t.bufSize)
	c.bw = bufio.NewWriterSize(&c.cw, t.bufSize)
	return c, nil
}

// popIdle takes the most recently used idle connection to addr; nil when
// there is none.
func (t *h1Transport) popIdle(addr string) *h1Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	t.idle[addr] = cs[:len(cs)-1]
	return c
}

// put keeps c for the next request to its address, or closes it when the
// address already has maxIdle idle connections.
func (t *h1Transport) put(c *h1Conn) {
	c.reused = false
	c.idleAt = time.Now()
	// Clear the request's deadline: the liveness peek before reuse would
	// fail on one that has passed.
	if err := c.conn.SetDeadline(time.Time{}); err != nil {
		c.conn.Close()
		return
	}
	t.mu.Lock()
	cs := t.idle[c.addr]
	if len(cs) >= t.maxIdle {
		t.mu.Unlock()
		c.conn.Close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*h1Conn{}
	}
	t.idle[c.addr] = append(cs, c)
	t.mu.Unlock()
}

// CloseIdleConnections closes every idle connection; connections in use
// are kept and go back to the pool when their requests end.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.conn.Close()
		}
	}
}

// h1Body is a response body of an h1Transport: it frees the connection
// when closed after being read to its end, and closes it otherwise (as
// net/http's Transport does with a body closed early).
type h1Body struct {
	t     *h1Transport
	c     *h1Conn
	body  io.ReadCloser
	eof   bool // read to its end
	reuse bool // the exchange allows the connection to be kept alive
	done  bool // closed
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on closed response body")
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close frees the connection for the next request when the body was read
// to its end and the exchange allows keep-alive, and closes it otherwise
// (without reading the rest). It returns the connection's Close error, or
// nil.
func (b *h1Body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if !b.eof || !b.reuse {
		// net/http's body Close would read the rest to its end first.
		return b.c.conn.Close()
	}
	_ = b.body.Close() // at its end: nothing left to read
	b.t.put(b.c)
	return nil
}

// countingWriter counts the bytes that reached w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// canonicalAddr is u's host:port, port 80 when u gives none: the address
// net/http's Transport dials (and the stream's per-connection routers are
// keyed by).
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// requestDeadline is the deadline of the request whose context is ctx:
// the one its dialState carries, else the context's own; zero for none.
func requestDeadline(ctx context.Context) time.Time {
	if d, _ := ctx.Value(dialStateKey{}).(*dialState); d != nil && !d.deadline.IsZero() {
		return d.deadline
	}
	dl, _ := ctx.Deadline()
	return dl
}

// closeRequestBody closes req's body, as a RoundTripper must even when it
// fails before sending.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
