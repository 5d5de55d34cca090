package refservices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	// Close releases pools and connections after the HTTP server stopped.
	Close()
}

// DefaultShutdownGrace is how long [Serve] lets in-flight requests finish
// after ctx is done: the 10 s draining window of HEALTH-ORD-001 MC-TR-01.
const DefaultShutdownGrace = 10 * time.Second

// Serve runs svc on ln until ctx is done (the caller cancels it on SIGTERM
// or SIGINT), then drains: readiness fails, the server stops accepting,
// in-flight requests get up to grace (default [DefaultShutdownGrace] when
// <= 0) to finish, and svc is closed. It returns nil after a clean
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

	srv := &http.Server{
		Handler:           svc.Handler(),
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
	logger.Info("shutting down", "cause", context.Cause(ctx), "grace", grace)
	svc.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
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
