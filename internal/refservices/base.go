package refservices

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Settings are what every reference service is configured with besides
// its own settings: the flags `drill serve` gives every service. Each
// service's Config holds them as fields of the same names ([Fields]).
type Settings struct {
	// Build is correct or naive; default correct.
	Build Build
	// DatabaseURL is the PostgreSQL DSN (URL or key=value); required.
	DatabaseURL string
	// ReadyTimeout bounds the readiness SELECT 1 on the dedicated
	// connection; default 250ms ([DefaultReadyTimeout]).
	ReadyTimeout time.Duration
	// WatchdogInterval is the liveness watchdog's kick period; default
	// 100ms ([NewWatchdog]).
	WatchdogInterval time.Duration
	// WatchdogStall is the kick age at which liveness fails; default 5s
	// ([NewWatchdog]).
	WatchdogStall time.Duration
	// DebugEndpoints enables the routes of [RegisterDebug]; default off.
	DebugEndpoints bool
}

// SetDefaults fills a zero Build (correct) and ReadyTimeout (250ms); a
// zero watchdog interval or stall takes [NewWatchdog]'s default.
func (st *Settings) SetDefaults() {
	if st.Build == "" {
		st.Build = BuildCorrect
	}
	if st.ReadyTimeout == 0 {
		st.ReadyTimeout = DefaultReadyTimeout
	}
}

// Fields points at the fields of a service's Config that hold its
// [Settings].
type Fields struct {
	Build            *Build
	DatabaseURL      *string
	ReadyTimeout     *time.Duration
	WatchdogInterval *time.Duration
	WatchdogStall    *time.Duration
	DebugEndpoints   *bool
}

// Get returns the settings the fields hold.
func (f Fields) Get() Settings {
	return Settings{Build: *f.Build, DatabaseURL: *f.DatabaseURL, ReadyTimeout: *f.ReadyTimeout,
		WatchdogInterval: *f.WatchdogInterval, WatchdogStall: *f.WatchdogStall, DebugEndpoints: *f.DebugEndpoints}
}

// Set stores st in the fields.
func (f Fields) Set(st Settings) {
	*f.Build, *f.DatabaseURL, *f.ReadyTimeout = st.Build, st.DatabaseURL, st.ReadyTimeout
	*f.WatchdogInterval, *f.WatchdogStall, *f.DebugEndpoints = st.WatchdogInterval, st.WatchdogStall, st.DebugEndpoints
}

// SetDefaults fills the zero ones with their defaults
// ([Settings.SetDefaults]).
func (f Fields) SetDefaults() {
	st := f.Get()
	st.SetDefaults()
	f.Set(st)
}

// Config is what [NewBase] needs of a reference service's configuration.
type Config interface {
	// SetDefaults fills zero fields with their defaults.
	SetDefaults()
	// Validate reports every invalid field, by its flag name.
	Validate() error
	// Common points at the fields of the settings every reference service
	// has.
	Common() Fields
}

// Base is what every reference service is built on: its logger, the
// dedicated readiness connection, the liveness watchdog, the health
// endpoints, the Prometheus registry, the HTTP routes and the background
// goroutines. A service embeds the *Base that [NewBase] makes, completes
// it with [Base.Init], and adds its own endpoints, metrics, start-up and
// release.
type Base struct {
	// Name is the service's name (`drill serve NAME`).
	Name string
	// Settings are the service's shared settings, defaults applied.
	Settings Settings
	// Logger is the service's logger; it discards when New got none.
	Logger *slog.Logger
	// Probe is the dedicated readiness connection (closed by the service's
	// Close).
	Probe *ProbeConn
	// Watchdog is the liveness watchdog, run by [Base.Launch].
	Watchdog *Watchdog
	// Registry holds the service's metrics, served on GET /metrics.
	Registry *prometheus.Registry

	health *Health
	mux    *http.ServeMux
	wg     sync.WaitGroup
}

// NewBase applies cfg's defaults, validates it and makes the base of the
// service called name; it does no I/O. logger nil discards. Errors start
// "configure NAME: " and name every invalid field by its flag, or the
// --database-url that does not parse.
func NewBase(name string, cfg Config, logger *slog.Logger) (*Base, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configure %s: %w", name, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st := cfg.Common().Get()
	probe, err := NewProbeConn(st.DatabaseURL, st.ReadyTimeout)
	if err != nil {
		return nil, fmt.Errorf("configure %s: --database-url: %w", name, err)
	}
	return &Base{
		Name:     name,
		Settings: st,
		Logger:   logger,
		Probe:    probe,
		Watchdog: NewWatchdog(st.WatchdogInterval, st.WatchdogStall),
		Registry: prometheus.NewRegistry(),
	}, nil
}

// Init makes the health endpoints and the routes. gate is the start-up
// precondition (no I/O; nil: none); readiness checks the dedicated
// connection ("database") and then checks. routes adds the service's own
// endpoints; beside them are GET /metrics (Registry, with the health
// metrics and the Go runtime's), the health endpoints of
// [Health.RegisterWithLegacy] or, when deep is not nil, deep on every one
// of their paths (a naive build's one deep check), and with DebugEndpoints
// those of [RegisterDebug]. Call it once, from the service's New.
func (b *Base) Init(gate func() error, deep http.HandlerFunc, routes func(mux *http.ServeMux), checks ...Check) {
	b.health = NewHealth(b.Logger, b.Watchdog, gate, append([]Check{{Name: "database", Run: b.Probe.Check}}, checks...)...)
	b.Registry.MustRegister(collectors.NewGoCollector())
	b.Registry.MustRegister(b.health.Collectors()...)
	mux := http.NewServeMux()
	routes(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.Registry, promhttp.HandlerOpts{}))
	if deep != nil {
		for _, p := range []string{PathLegacy, PathStartup, PathLive, PathReady, PathADRStartup, PathADRLive, PathADRReady} {
			mux.HandleFunc("GET "+p, deep)
		}
	} else {
		b.health.RegisterWithLegacy(mux)
	}
	if b.Settings.DebugEndpoints {
		RegisterDebug(mux, b.Logger, b.Watchdog)
	}
	b.mux = mux
}

// Naive reports whether the naive build runs.
func (b *Base) Naive() bool { return b.Settings.Build == BuildNaive }

// Handler serves every endpoint of the service.
func (b *Base) Handler() http.Handler { return b.mux }

// Health returns the service's health state.
func (b *Base) Health() *Health { return b.health }

// Drain makes readiness answer 503 "draining".
func (b *Base) Drain() { b.health.Drain() }

// ExitsAtOnce reports whether [Serve] closes the server at once on
// SIGTERM: the naive builds do, dropping requests in flight; the correct
// builds drain (HEALTH-ORD-001 MC-TR-01).
func (b *Base) ExitsAtOnce() bool { return b.Naive() }

// Launch runs the watchdog and startUp, the service's start-up sequence,
// in background goroutines bound to ctx, and returns at once.
func (b *Base) Launch(ctx context.Context, startUp func(ctx context.Context)) {
	b.Go(func() { b.Watchdog.Run(ctx) })
	b.Go(func() { startUp(ctx) })
}

// Go runs fn in a background goroutine that [Base.Wait] waits for.
func (b *Base) Go(fn func()) {
	b.wg.Add(1)
	go func() { defer b.wg.Done(); fn() }()
}

// Wait waits for the background goroutines; the ctx they were started
// with must be done.
func (b *Base) Wait() { b.wg.Wait() }
