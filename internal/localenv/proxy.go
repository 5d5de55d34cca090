package localenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
)

// Proxy is a local Service: one port that spreads traffic round-robin
// across the ready endpoints only, as kube-proxy does with the ready
// endpoints of a Service's EndpointSlices.
//
// With [PerRequest] balancing (the default) it is an HTTP reverse proxy
// that balances every request, so a replica that goes unready stops
// getting requests at once, even on kept-alive client connections; it
// answers 503 with a short body when no endpoint is ready, and 502 on a
// backend error (a replica dying mid-request); requests are never retried
// on another replica. With [PerConnection] balancing it relays TCP
// connections, each to the endpoint picked when it was accepted, as
// kube-proxy does (see [PerConnection]). Safe for concurrent use.
type Proxy struct {
	service string
	clock   *event.Clock
	sink    event.Sink
	source  string
	log     *slog.Logger

	ln        net.Listener
	srv       *http.Server // PerRequest only
	tr        *http.Transport
	balancing Balancing
	// PerConnection: the relayed connections, and a context whose end
	// closes them all.
	conns   sync.WaitGroup
	baseCtx context.Context
	cancel  context.CancelFunc

	rr    atomic.Uint64
	ready atomic.Pointer[[]*endpoint] // immutable snapshot, sorted by order

	mu     sync.Mutex
	eps    map[string]*endpoint // by pod: every known endpoint
	closed bool
	served chan struct{}
}

type endpoint struct {
	pod   string
	addr  string
	order int
	ready bool
	// terminating: the pod is being deleted (never ready again); serving
	// is its readiness meanwhile (EndpointSlice conditions.serving).
	terminating, serving bool
	rp                   *httputil.ReverseProxy
	// failed counts the requests to it that failed at the backend (the
	// Service answered them 502: refused, reset, closed mid-answer).
	failed *atomic.Int64
}

// endpointLocked returns pod's endpoint, and true; or, when it has none or
// one at another address, a new one at addr (order its place in the round
// robin), and false. Callers hold p.mu.
func (p *Proxy) endpointLocked(pod, addr string, order int) (*endpoint, bool) {
	if e, ok := p.eps[pod]; ok && e.addr == addr {
		return e, true
	}
	e := p.newEndpoint(pod, addr, order)
	p.eps[pod] = e
	return e, false
}

// newEndpoint is the endpoint of pod at addr with its reverse proxy.
func (p *Proxy) newEndpoint(pod, addr string, order int) *endpoint {
	failed := new(atomic.Int64)
	return &endpoint{pod: pod, addr: addr, order: order, rp: p.newReverseProxy(pod, addr, failed), failed: failed}
}

// NewProxy listens on addr (host:port; "" means 127.0.0.1:0) and serves
// until Close, balancing as balancing says. Endpoint events carry service
// as their Service and source as their Source ("" means "local-runtime").
// The error is the listen error.
func NewProxy(service, addr string, balancing Balancing, clock *event.Clock, sink event.Sink, source string, log *slog.Logger) (*Proxy, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for service %s on %s: %w", service, addr, err)
	}
	p := newProxy(service, balancing, clock, sink, source, log)
	p.ln = ln
	if balancing == PerConnection {
		go p.serveL4()
		return p, nil
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(p.served)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("service proxy stopped", "err", err)
		}
	}()
	return p, nil
}

// NewRouter is a Service without a listener: it routes only through
// [Proxy.RoundTripVia] and [Proxy.DialVia] (drill's own load, picked as
// kube-proxy picks in the kernel), while a [Listener] elsewhere (a
// stand-in process) serves other clients on the Service's address. Its
// URL and Addr are empty; endpoint events are emitted as [NewProxy]'s.
func NewRouter(service string, balancing Balancing, clock *event.Clock, sink event.Sink, source string, log *slog.Logger) *Proxy {
	p := newProxy(service, balancing, clock, sink, source, log)
	close(p.served)
	return p
}

// newProxy is a Proxy without its listener.
func newProxy(service string, balancing Balancing, clock *event.Clock, sink event.Sink, source string, log *slog.Logger) *Proxy {
	if source == "" {
		source = DefaultSource
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if sink == nil {
		sink = event.SinkFunc(func(event.Event) {})
	}
	p := &Proxy{
		service: service, clock: clock, sink: sink, source: source,
		log: log.With("service", service), balancing: balancing,
		eps:    map[string]*endpoint{},
		served: make(chan struct{}),
		tr: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          0, // no global cap
			MaxIdleConnsPerHost:   2048,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     false,
			// net/http's default 4 KiB buffers: a request or an answer
			// larger than that just takes more reads, while a burst of new
			// connections (every request in flight holds one, e.g. when
			// the backends stall) no longer allocates and clears 64 KiB
			// for each.
		},
	}
	p.ready.Store(&[]*endpoint{})
	p.baseCtx, p.cancel = context.WithCancel(context.Background())
	return p
}

// URL is http://<listen address> of the proxy ("" for a [NewRouter]).
func (p *Proxy) URL() string {
	if p.ln == nil {
		return ""
	}
	return "http://" + p.ln.Addr().String()
}

// Addr is the proxy's listen address (host:port; "" for a [NewRouter]).
func (p *Proxy) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// ServeHTTP implements http.Handler (per-request balancing).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e, ok := p.pick()
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set(measure.ServiceAnswerHeader, "no-endpoints")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(p.noEndpointsBody()))
		return
	}
	if !p.bufferBody(w, r) {
		return
	}
	if !plainRequest(r) {
		e.rp.ServeHTTP(w, r)
		return
	}
	p.forward(e, w, r)
}

// RoundTripVia routes one request the way the Service's listener does,
// in the caller's process: round-robin over the ready endpoints, sent with
// base (the caller's transport and connection pools) straight to the
// endpoint. With no ready endpoint it answers 503 and with a backend error
// 502, with the same headers and bodies as [Proxy.ServeHTTP]; only the
// loopback hop to the listener (which kube-proxy does in the kernel) is
// left out. req.Host, when empty, becomes the Service address, as a client
// of the listener would send. It returns base's error only when the
// caller gave up: req's context ended, or the error is
// os.ErrDeadlineExceeded (a deadline the caller's transport set on its
// connection). Safe for concurrent use.
func (p *Proxy) RoundTripVia(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	e, ok := p.pick()
	if !ok {
		return p.answer(req, http.StatusServiceUnavailable, "no-endpoints",
			p.noEndpointsBody()), nil
	}
	out := *req // shallow: the caller's request is only read
	u := *req.URL
	u.Host = e.addr
	out.URL = &u
	if out.Host == "" {
		out.Host = req.URL.Host
	}
	res, err := base.RoundTrip(&out)
	if err != nil {
		// The caller gave up: its context ended, or the deadline it set on
		// the connection passed (a client that times out its own sockets).
		if req.Context().Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, err
		}
		e.failed.Add(1)
		return p.answer(req, http.StatusBadGateway, "backend-error",
			p.backendErrorBody(e.pod, err)), nil
	}
	// The marker says the Service answered: never a replica's.
	delete(res.Header, measure.ServiceAnswerHeader)
	return res, nil
}

// noEndpointsBody is the body of the Service's 503 when no endpoint is ready.
func (p *Proxy) noEndpointsBody() string {
	return "no ready endpoints for service " + p.service + "\n"
}

// backendErrorBody is the body of the Service's 502 when pod's request failed.
func (p *Proxy) backendErrorBody(pod string, err error) string {
	return "service " + p.service + ": pod " + pod + ": " + err.Error() + "\n"
}

// answer is a response of the Service itself (not of a backend), as
// ServeHTTP writes them: status, the reason in
// [measure.ServiceAnswerHeader], plain-text body.
func (p *Proxy) answer(req *http.Request, status int, reason, body string) *http.Response {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{
		Status:     strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":              {"text/plain; charset=utf-8"},
			measure.ServiceAnswerHeader: {reason},
			"Content-Length":            {strconv.Itoa(len(body))},
		},
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(strings.NewReader(body)),
		Request:       req,
	}
}

// hopHeaders are the hop-by-hop headers (RFC 9110 7.6.1) and the
// forwarding headers httputil.ReverseProxy strips in Rewrite mode; a
// request carrying any of them takes the ReverseProxy path.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Expect",
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
}

// plainRequest reports whether r can take the lean path of
// [Proxy.forward]: HTTP/1.x, no hop-by-hop or forwarding headers, no
// trailers, a body that is empty or read whole, and a query that
// ReverseProxy would not clean.
func plainRequest(r *http.Request) bool {
	if r.ProtoMajor != 1 || len(r.Trailer) != 0 || strings.Contains(r.URL.RawQuery, ";") {
		return false
	}
	if r.ContentLength != 0 {
		if _, ok := r.Body.(*bufferedBody); !ok {
			return false
		}
	}
	for _, h := range hopHeaders {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	return true
}

// forward is httputil.ReverseProxy's request path for plain requests
// (see plainRequest) without its per-request extras (a deep clone of the
// request, a client trace for 1xx answers, header copies value by value):
// the same request reaches the backend (URL, Host, headers, body; no
// User-Agent is added) and the same answer reaches the client (status,
// headers without hop-by-hop ones, body, trailers; a body of unknown
// length is flushed as it arrives). A backend error before the answer
// gives the endpoint's 502; one while copying the body aborts the
// response, as ReverseProxy does.
func (p *Proxy) forward(e *endpoint, w http.ResponseWriter, r *http.Request) {
	u := *r.URL
	u.Scheme, u.Host = "http", e.addr
	if _, ok := r.Header["User-Agent"]; !ok {
		r.Header["User-Agent"] = []string{""} // net/http then sends none
	}
	out := (&http.Request{
		Method: r.Method, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header, Host: r.Host, ContentLength: r.ContentLength,
	}).WithContext(r.Context())
	if bb, ok := r.Body.(*bufferedBody); ok && r.ContentLength > 0 {
		out.Body = io.NopCloser(bytes.NewReader(bb.b))
	}
	res, err := p.tr.RoundTrip(out)
	if err != nil {
		e.rp.ErrorHandler(w, r, err)
		return
	}
	defer res.Body.Close()
	h := w.Header()
	for k, vv := range res.Header {
		h[k] = vv
	}
	for _, k := range hopHeaders[:8] {
		delete(h, k)
	}
	delete(h, "Proxy-Authenticate")
	delete(h, measure.ServiceAnswerHeader) // the replica's answer, not the Service's
	if c := res.Header["Connection"]; len(c) > 0 {
		for _, v := range c {
			for _, k := range strings.Split(v, ",") {
				h.Del(strings.TrimSpace(k))
			}
		}
	}
	w.WriteHeader(res.StatusCode)
	buf := bufPool.Get()
	defer bufPool.Put(buf)
	var flush func() error
	if res.ContentLength == -1 {
		flush = http.NewResponseController(w).Flush
	}
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client went away
			}
			if flush != nil {
				_ = flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if r.Context().Err() != nil {
				return
			}
			panic(http.ErrAbortHandler) // the client must not take a cut body for a whole one
		}
	}
	for k, vv := range res.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
}

// maxBufferedBody is the largest request body (bytes) the proxy reads
// whole before forwarding.
const maxBufferedBody = 64 << 10

// bufferBody reads a small request body of known length whole and hands
// it on in memory: net/http then sends the body in the same write as the
// headers. Any other body (a streamed one would make net/http
// flush the headers first and copy the body in a second write, a
// syscall per request) is left as it is, as are requests that expect 100
// Continue (the backend decides those). It reports false when it already
// answered (the client sent less than it announced).
func (p *Proxy) bufferBody(w http.ResponseWriter, r *http.Request) bool {
	n := r.ContentLength
	if n <= 0 || n > maxBufferedBody || r.Body == nil || r.Header.Get("Expect") != "" {
		return true
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		// The client is most likely gone; if not, it learns why.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set(measure.ServiceAnswerHeader, "bad-request-body")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("service " + p.service + ": read request body: " + err.Error() + "\n"))
		return false
	}
	_ = r.Body.Close()
	r.Body = &bufferedBody{Reader: bytes.NewReader(b), b: b}
	return true
}

// bufferedBody is a request body read whole by [Proxy.bufferBody].
// httputil.ReverseProxy wraps the outgoing body in a type net/http does
// not know to be in memory, so the Rewrite hook replaces it with a plain
// one over the same bytes.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (*bufferedBody) Close() error { return nil }

// SetEndpoint adds or updates the endpoint of pod at addr (host:port).
// order fixes its place in the round-robin (e.g. the replica index). A
// change of readiness takes effect for the next request and emits
// EndpointReady or EndpointNotReady at that moment. After Close it does
// nothing.
func (p *Proxy) SetEndpoint(pod, addr string, order int, ready bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	e, ok := p.endpointLocked(pod, addr, order)
	if !ok && !ready {
		return // a new, unready endpoint: nothing routed, nothing changed
	}
	if e.ready == ready && ok || e.terminating {
		return // a terminating endpoint is never ready again
	}
	e.ready = ready
	p.publishLocked()
	kind := event.EndpointNotReady
	detail := "ready=false serving=false terminating=false"
	if ready {
		kind, detail = event.EndpointReady, "ready=true serving=true terminating=false"
	}
	p.emitLocked(kind, e, detail)
}

// SetEndpointTerminating marks the endpoint of pod at addr as a
// terminating one, as the EndpointSlice controller does for a pod being
// deleted: conditions ready=false, serving (the pod's readiness, which
// its probes keep updating) and terminating=true. It gets no new request
// from then on; requests in flight on it, and per connection the
// connections relayed to it, finish or fail by the replica's own doing.
// Every change of serving emits EndpointNotReady with the three
// conditions in Detail. After Close it does nothing.
func (p *Proxy) SetEndpointTerminating(pod, addr string, order int, serving bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	e, ok := p.endpointLocked(pod, addr, order)
	if ok && e.terminating && e.serving == serving {
		return
	}
	wasReady := e.ready
	e.ready, e.terminating, e.serving = false, true, serving
	if wasReady {
		p.publishLocked()
	}
	p.emitLocked(event.EndpointNotReady, e, fmt.Sprintf("ready=false serving=%t terminating=true", serving))
}

// RemoveEndpoint forgets the endpoint of pod: it gets no more requests
// (those in flight finish) and, if it was known, EndpointRemoved is
// emitted. For callers that route from an external endpoint list (a node
// agent following EndpointSlices). After Close it does nothing.
func (p *Proxy) RemoveEndpoint(pod string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.eps[pod]
	if p.closed || !ok {
		return
	}
	delete(p.eps, pod)
	if e.ready {
		p.publishLocked()
	}
	n := e.failed.Load()
	p.sink.Emit(event.Event{At: p.clock.Now(), Kind: event.EndpointRemoved, Source: p.source, Service: p.service,
		Pod: e.pod, Address: e.addr, Value: float64(n),
		Detail: fmt.Sprintf("endpoint removed; %d requests to it failed at the backend (answered 502)", n)})
}

// Close stops routing (emitting EndpointRemoved for every endpoint), then
// shuts the listener down. Per request it waits for in-flight requests
// until ctx ends (the error says it ended first); per connection it waits
// for the relayed connections at most 2 s or until ctx ends, then closes
// the rest (clients' idle kept-alive connections) and returns nil.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.served
		return nil
	}
	p.closed = true
	eps := make([]*endpoint, 0, len(p.eps))
	for _, e := range p.eps {
		eps = append(eps, e)
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].order < eps[j].order })
	p.ready.Store(&[]*endpoint{})
	for _, e := range eps {
		p.emitLocked(event.EndpointRemoved, e, "service stopped")
	}
	p.mu.Unlock()
	var err error
	switch {
	case p.ln == nil: // a router: nothing listens
	case p.balancing == PerConnection:
		err = p.closeL4(ctx)
	default:
		err = p.srv.Shutdown(ctx)
		if err != nil {
			_ = p.srv.Close()
		}
	}
	<-p.served
	p.cancel()
	p.tr.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("shut down proxy for service %s: %w", p.service, err)
	}
	return nil
}

func (p *Proxy) publishLocked() {
	var eps []*endpoint
	for _, e := range p.eps {
		if e.ready {
			eps = append(eps, e)
		}
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].order < eps[j].order })
	p.ready.Store(&eps)
}

func (p *Proxy) emitLocked(kind event.Kind, e *endpoint, detail string) {
	p.sink.Emit(event.Event{At: p.clock.Now(), Kind: kind, Source: p.source, Service: p.service,
		Pod: e.pod, Address: e.addr, Detail: detail})
}

var bufPool = &bytePool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bytePool struct{ p sync.Pool }

func (b *bytePool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bytePool) Put(x []byte) { b.p.Put(&x) }

func (p *Proxy) newReverseProxy(pod, addr string, failed *atomic.Int64) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: addr}
	log := p.log.With("pod", pod)
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // an L4 proxy leaves Host alone
			if bb, ok := pr.In.Body.(*bufferedBody); ok {
				pr.Out.Body = io.NopCloser(bytes.NewReader(bb.b))
			}
		},
		Transport:  p.tr,
		BufferPool: bufPool,
		// The marker says the Service answered: never a replica's.
		ModifyResponse: func(res *http.Response) error {
			delete(res.Header, measure.ServiceAnswerHeader)
			return nil
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			failed.Add(1)
			log.Debug("backend request failed", "err", err)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set(measure.ServiceAnswerHeader, "backend-error")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(p.backendErrorBody(pod, err)))
		},
	}
}
