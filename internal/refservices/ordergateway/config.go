package ordergateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/refservices"
)

// PressureMode says how work-queue pressure enters readiness
// (HEALTH-ORD-001 MC-PS-01 "rejected if active work queues >= 90%" against
// ADR 0077 "readiness does not measure load"); see the package doc.
type PressureMode string

// Pressure modes.
const (
	// PressureStalled (default) fails readiness when the in-flight count is
	// at or above the threshold AND no order was written during the
	// pressure window: a full queue that is not draining. A saturated
	// service that still writes orders stays ready (ADR 0077).
	PressureStalled PressureMode = "stalled"
	// PressureStrict fails readiness whenever the in-flight count is at or
	// above the threshold (the literal MC-PS-01 rule).
	PressureStrict PressureMode = "strict"
	// PressureOff leaves load out of readiness entirely.
	PressureOff PressureMode = "off"
)

// Defaults of [Config].
const (
	DefaultPoolSize          = 8
	DefaultMaxInFlight       = 1024
	DefaultDBTimeout         = time.Second
	DefaultReadyTimeout      = refservices.DefaultReadyTimeout
	DefaultPressureThreshold = 0.9
	DefaultPressureWindow    = time.Second
	DefaultMaxBodyBytes      = 64 << 10
	DefaultMaxBatch          = 64
)

// Sentinels of [Config] after [Config.SetDefaults].
const (
	// Unlimited as MaxInFlight: no in-flight limit.
	Unlimited = -1
	// NoTimeout as DBTimeout: no deadline of the service's own.
	NoTimeout time.Duration = -1
	// NoInterval as ReadinessInterval: no readiness evaluation of the
	// service's own (only when asked on /readyz).
	NoInterval time.Duration = -1
)

// Config configures an order-gateway. Zero fields take the defaults given
// on each field ([Config.SetDefaults]).
type Config struct {
	// Build is correct (HEALTH-ORD-001) or naive (INC-3119); default correct.
	Build refservices.Build
	// DatabaseURL is the PostgreSQL DSN (URL or key=value); required.
	DatabaseURL string
	// PoolSize is the request pool's size: connections opened at start and
	// kept; default 8 (3 replicas x 8 keep PostgreSQL on 2 cores busy
	// without thrashing).
	PoolSize int32
	// PoolOverflow is how many connections beyond PoolSize the request pool
	// opens while every pooled one is busy, closed again once PoolSize are
	// idle (ADR 0077: "the database pools are bounded and budgeted",
	// MOWDECK_DATABASE_POOL_SIZE + MOWDECK_DATABASE_MAX_OVERFLOW, default 5
	// + 5 there); default 0. A replica holds at most PoolSize +
	// PoolOverflow request connections plus the readiness connection (the
	// correct build's), which is the budget it logs at start against the
	// database's max_connections.
	PoolOverflow int32
	// ReadinessInterval is how often the correct build evaluates its
	// readiness checks after it has started, logging "service not ready"
	// with the failing checks and "service ready again", and setting the
	// readiness_check_up gauges (ADR 0077,
	// MOWDECK_READINESS_INTERVAL_SECONDS); 0 means the default, 30s;
	// negative ([NoInterval]) turns it off. The naive build has none.
	ReadinessInterval time.Duration
	// MaxInFlight bounds concurrent POST /orders; beyond it requests get
	// 503 at once (ERR_ORDER_OVERLOADED). Negative means unlimited; 0
	// means the build's default: 1024 (correct: about a replica's peak
	// rate, 933 orders/s, times the 1 s DBTimeout, so only work that could
	// not finish within its deadline anyway is shed, and a stalled database
	// holds at most 1024 goroutines) or unlimited (naive: the legacy
	// service had no admission control).
	MaxInFlight int
	// DBTimeout is each order's deadline for its database work (acquiring a
	// connection and the INSERT); on expiry 503 ERR_ORDER_DB_TIMEOUT.
	// Negative means none (the request's own context only); 0 means the
	// build's default: 1s (correct) or none (naive).
	DBTimeout time.Duration
	// MaxBatch is the most orders written by one INSERT; default 64 in both
	// builds. Above 1, PoolSize writer goroutines group-commit whatever is
	// queued (one round trip per batch); 1 means one INSERT per request on
	// the request's goroutine, each queueing for a pool connection (use it
	// to make a slow database saturate the pool, as in the ADR 0077
	// overload drill).
	MaxBatch int
	// ReadyTimeout bounds the readiness SELECT 1 on the dedicated
	// connection (MC-PS-01); default 250ms.
	ReadyTimeout time.Duration
	// Pressure is how in-flight pressure enters readiness; default stalled.
	Pressure PressureMode
	// PressureThreshold is the in-flight fraction of MaxInFlight counted as
	// pressure, 0..1; default 0.9 (MC-PS-01).
	PressureThreshold float64
	// PressureWindow is how long without a written order makes pressure a
	// stall (PressureStalled only); default 1s.
	PressureWindow time.Duration
	// WatchdogInterval is the liveness watchdog's kick period; default 100ms.
	WatchdogInterval time.Duration
	// WatchdogStall is the kick age at which liveness fails; default 5s.
	WatchdogStall time.Duration
	// Warmup delays the first readiness pass after the pool is up, to
	// imitate a slow start (startup probe drills); default 0.
	Warmup time.Duration
	// WarmupRate, when > 0, adds a warm-up that grows with the data: the
	// replica primes a cache of the orders written so far at this many
	// orders per second (it counts them and waits count/WarmupRate, at
	// most WarmupMax), so a replica that starts on an empty table is warm
	// at once and one that replaces another under load starts cold (the
	// cold-start drills of MC-PS-01). Orders/s; default 0 (off).
	WarmupRate float64
	// WarmupMax caps the warm-up of WarmupRate; default 100s (the startup
	// window MC-PS-01 allows).
	WarmupMax time.Duration
	// VendorURL is a payment vendor (a third-party API) that every order
	// calls once (GET) before it is written. The correct build bounds the
	// call by VendorTimeout behind a circuit breaker (5 failures in a row
	// open it for 5 s) and accepts the order as payment_pending when the
	// vendor fails, and keeps the vendor out of readiness and liveness
	// (HEALTH-ORD-001 INV-HLT-03, MC-CF-01, INV-HLT-01). The naive build
	// waits for the vendor with no timeout of its own, answers 503 when it
	// fails, and its one deep /health GETs it too, so a slow vendor fails
	// readiness and liveness. Default "" (none).
	VendorURL string
	// VendorTimeout bounds the correct build's vendor call; default
	// 250ms.
	VendorTimeout time.Duration
	// MaxBodyBytes caps an order's body; larger ones get 413; default 64 KiB.
	MaxBodyBytes int64
	// DebugEndpoints enables POST /debug/watchdog/stop, which stops the
	// watchdog so liveness fails (a simulated deadlock); default off.
	DebugEndpoints bool
}

// Common points at c's fields of the settings every reference service has
// ([refservices.Settings]).
func (c *Config) Common() refservices.Fields {
	return refservices.Fields{Build: &c.Build, DatabaseURL: &c.DatabaseURL, ReadyTimeout: &c.ReadyTimeout,
		WatchdogInterval: &c.WatchdogInterval, WatchdogStall: &c.WatchdogStall, DebugEndpoints: &c.DebugEndpoints}
}

// SetDefaults fills zero fields with their defaults.
func (c *Config) SetDefaults() {
	c.Common().SetDefaults()
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	naive := c.Build == refservices.BuildNaive
	switch {
	case c.MaxInFlight < 0 || (c.MaxInFlight == 0 && naive):
		c.MaxInFlight = Unlimited
	case c.MaxInFlight == 0:
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	switch {
	case c.DBTimeout < 0 || (c.DBTimeout == 0 && naive):
		c.DBTimeout = NoTimeout
	case c.DBTimeout == 0:
		c.DBTimeout = DefaultDBTimeout
	}
	if c.ReadinessInterval == 0 {
		c.ReadinessInterval = refservices.DefaultReadinessInterval
	}
	if c.Pressure == "" {
		c.Pressure = PressureStalled
	}
	if c.PressureThreshold == 0 {
		c.PressureThreshold = DefaultPressureThreshold
	}
	if c.PressureWindow == 0 {
		c.PressureWindow = DefaultPressureWindow
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WarmupMax == 0 {
		c.WarmupMax = DefaultWarmupMax
	}
	if c.VendorTimeout == 0 {
		c.VendorTimeout = DefaultVendorTimeout
	}
}

// DefaultWarmupMax is [Config.WarmupMax]'s default: 100 s, the warm-up
// HEALTH-ORD-001 MC-PS-01's startup probe allows.
const DefaultWarmupMax = 100 * time.Second

// Validate reports every invalid field, by its flag name.
func (c Config) Validate() error {
	errs := refservices.ValidateBase(c.Build, c.DatabaseURL)
	if c.PoolSize < 1 {
		errs = append(errs, fmt.Errorf("--pool-size: must be >= 1, got %d", c.PoolSize))
	}
	if c.PoolOverflow < 0 {
		errs = append(errs, fmt.Errorf("--pool-overflow: must be >= 0, got %d", c.PoolOverflow))
	}
	if c.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("--max-batch: must be >= 1, got %d", c.MaxBatch))
	}
	if c.ReadyTimeout < 0 {
		errs = append(errs, fmt.Errorf("--ready-timeout: must be > 0, got %s", c.ReadyTimeout))
	}
	switch c.Pressure {
	case PressureStalled, PressureStrict, PressureOff:
	default:
		errs = append(errs, fmt.Errorf("--ready-pressure: unknown mode %q; available: off, stalled, strict", c.Pressure))
	}
	if c.PressureThreshold <= 0 || c.PressureThreshold > 1 {
		errs = append(errs, fmt.Errorf("--pressure-threshold: must be in (0, 1], got %g", c.PressureThreshold))
	}
	if c.PressureWindow < 0 {
		errs = append(errs, fmt.Errorf("--pressure-window: must be > 0, got %s", c.PressureWindow))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("--warmup: must be >= 0, got %s", c.Warmup))
	}
	if c.WarmupRate < 0 {
		errs = append(errs, fmt.Errorf("--warmup-rate: must be >= 0, got %g", c.WarmupRate))
	}
	if c.WarmupMax < 0 {
		errs = append(errs, fmt.Errorf("--warmup-max: must be >= 0, got %s", c.WarmupMax))
	}
	if c.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("max body bytes: must be >= 1, got %d", c.MaxBodyBytes))
	}
	return errors.Join(errs...)
}
