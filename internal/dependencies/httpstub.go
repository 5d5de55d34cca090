package dependencies

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

// Defaults applied by [StartHTTPStub] to an unset [scenario.HTTPStubDep] field.
const (
	DefaultStubStatus      = http.StatusOK
	DefaultStubBody        = "{}"
	DefaultStubContentType = "application/json"
)

// HTTPStub is a local HTTP service that answers every request, whatever its
// method and path, with a fixed status, body and content type after a fixed
// latency: the "tax API" of BULKHEAD-PAY-001. It is safe for concurrent use.
type HTTPStub struct {
	// Addr is the listen address, 127.0.0.1:<port>.
	Addr string
	// URL is http://Addr.
	URL string

	srv      *http.Server
	ln       net.Listener
	latency  atomic.Int64 // ns
	status   int
	body     []byte
	ctype    string
	requests atomic.Int64
	inFlight atomic.Int64
	served   chan error
	once     sync.Once
	closeErr error
}

// StartHTTPStub starts a stub on a random free port of 127.0.0.1.
// Defaults: status 200, body "{}", content type application/json, latency 0.
// The latency wait ends early when the client goes away (the request's
// context is cancelled); nothing is written then.
func StartHTTPStub(ctx context.Context, spec scenario.HTTPStubDep) (*HTTPStub, error) {
	if spec.Status == 0 {
		spec.Status = DefaultStubStatus
	}
	if spec.Status < 100 || spec.Status > 999 {
		return nil, fmt.Errorf("start http stub: status %d is not an HTTP status", spec.Status)
	}
	if spec.Body == "" {
		spec.Body = DefaultStubBody
	}
	if spec.ContentType == "" {
		spec.ContentType = DefaultStubContentType
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for http stub: %w", err)
	}
	s := &HTTPStub{
		Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(),
		ln: ln, status: spec.Status, body: []byte(spec.Body), ctype: spec.ContentType,
		served: make(chan error, 1),
	}
	s.latency.Store(int64(spec.Latency.D()))
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// ServeHTTP answers one request.
func (s *HTTPStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	// Read the body first: net/http notices a client that went away (and
	// cancels r.Context) only once the request body has been consumed.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	if d := time.Duration(s.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", s.ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
	w.WriteHeader(s.status)
	_, _ = w.Write(s.body)
}

// SetLatency changes the latency of requests that arrive from now on.
func (s *HTTPStub) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// Requests is the number of requests received so far (including ones still
// waiting or abandoned by their client).
func (s *HTTPStub) Requests() int64 { return s.requests.Load() }

// InFlight is the number of requests being answered right now.
func (s *HTTPStub) InFlight() int64 { return s.inFlight.Load() }

// Close stops the stub: it stops accepting, cancels waiting requests and
// closes every connection. Idempotent.
func (s *HTTPStub) Close() error {
	s.once.Do(func() {
		err := s.srv.Close() // cancels request contexts, so latency waits end
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close http stub %s: %w", s.Addr, err)
		}
	})
	return s.closeErr
}
