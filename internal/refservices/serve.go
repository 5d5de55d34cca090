package refservices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Service is a reference service as [Serve] runs it.
type Service interface {
	// Handler serves every endpoint of the service.
	Handler() http.Handler
	// Start launches the service's background work (watchdog, database
	// connection, start-up checks) bound to ctx and returns at once; the
	// HTTP server is already accepting, so the startup probe sees 503 until
	// the service has started.
	Start(ctx context.Context)
	// Drain makes readiness fail (SIGTERM received).
	Drain()
	// ExitsAtOnce reports whether the service stops at once on SIGTERM,
	// dropping in-flight and kept-alive requests (the naive builds), instead
	// of draining as HEALTH-ORD-001 MC-TR-01 asks.
	ExitsAtOnce() bool
	// Close releases pools and connections after the HTTP server stopped.
	Close()
}

// DefaultShutdownGrace is how long [Serve] lets in-flight requests finish
// after ctx is done: the 10 s draining window of HEALTH-ORD-001 MC-TR-01.
const DefaultShutdownGrace = 10 * time.Second

// DrainQuiet is how long a draining service waits with no request in
// flight and none begun (probes and /metrics not counted) before it stops
// accepting: long enough for a load balancer that still routed to it when
// SIGTERM came to have stopped (HEALTH-ORD-001 MC-TR-01 gives 1,000 ms for
// the EndpointSlice removal), short enough that a service nobody calls
// stops within about a second.
const DrainQuiet = time.Second

// Serve runs svc on ln until ctx is done (the caller cancels it on SIGTERM
// or SIGINT), then drains (HEALTH-ORD-001 MC-TR-01): readiness fails at
// once; the server keeps accepting and serving, kept-alive connections
// included, until no request has been in flight or begun for [DrainQuiet];
// then it stops accepting, closes idle connections and lets in-flight
// requests finish. The whole drain is bounded by grace (default
// [DefaultShutdownGrace] when <= 0); svc is closed last. A service whose
// ExitsAtOnce is true (a naive build) skips the drain: the server closes
// at once, failing whatever was in flight. Serve returns nil after either
// shutdown, or the error that stopped the server.
func Serve(ctx context.Context, logger *slog.Logger, ln net.Listener, svc Service, grace time.Duration) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		stopBG() // Close waits for the background work, which needs this
		svc.Close()
	}()

	var tr traffic
	tr.t0 = time.Now()
	srv := &http.Server{
		Handler:           tr.wrap(svc.Handler()),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	svc.Start(bgCtx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	if svc.ExitsAtOnce() {
		logger.Info("exiting at once, dropping requests in flight (naive build: no drain)", "cause", context.Cause(ctx),
			"in_flight", tr.inFlight.Load())
		stopBG()
		if err := srv.Close(); err != nil {
			return fmt.Errorf("close http server: %w", err)
		}
		return nil
	}
	logger.Info("draining", "cause", context.Cause(ctx), "grace", grace, "quiet", DrainQuiet)
	svc.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	tr.waitQuiet(sctx, DrainQuiet)
	logger.Info("shutting down", "in_flight", tr.inFlight.Load())
	err := srv.Shutdown(sctx)
	stopBG()
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down http server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// traffic tracks a server's requests for the drain: how many are in flight
// and when the last one began or ended. Probes (/healthz..., /health) and
// /metrics are not counted: a kubelet probing a draining pod is not a
// client.
type traffic struct {
	t0       time.Time
	inFlight atomic.Int64
	last     atomic.Int64 // ns since t0 of the last request's start or end
}

// counted reports whether a request to path is client traffic.
func counted(path string) bool {
	return !strings.HasPrefix(path, "/healthz") && path != "/health" && path != "/metrics"
}

// wrap counts the client requests h serves.
func (t *traffic) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !counted(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		t.inFlight.Add(1)
		t.last.Store(int64(time.Since(t.t0)))
		defer func() {
			t.last.Store(int64(time.Since(t.t0)))
			t.inFlight.Add(-1)
		}()
		h.ServeHTTP(w, r)
	})
}

// waitQuiet returns once no counted request has been in flight or begun
// for quiet, or when ctx is done, whichever is first. It polls every
// 20 ms.
func (t *traffic) waitQuiet(ctx context.Context, quiet time.Duration) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		idle := time.Since(t.t0) - time.Duration(t.last.Load())
		if t.inFlight.Load() == 0 && idle >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
