package paymentcore

import (
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/refservices"
)

// LaneConfig sizes one bulkhead and its database pool.
type LaneConfig struct {
	// Workers is the lane's concurrency limit (permits).
	Workers int
	// Queue is the FIFO queue's capacity; 0 = reject at once.
	Queue int
	// QueueTimeout bounds a queued request's wait for a worker.
	QueueTimeout time.Duration
	// Pool is the lane's maximum database connections.
	Pool int32
}

// Lane defaults of BULKHEAD-PAY-001 MC-PO-01 / INV-BH-03, and of the naive
// build's shared pool (INC-4491).
var (
	DefaultAuthLane   = LaneConfig{Workers: 75, Queue: 10, QueueTimeout: 100 * time.Millisecond, Pool: 40}
	DefaultFraudLane  = LaneConfig{Workers: 30, Queue: 5, QueueTimeout: 100 * time.Millisecond, Pool: 15}
	DefaultTaxLane    = LaneConfig{Workers: 15, Queue: 0, Pool: 5}
	DefaultSharedLane = LaneConfig{Workers: 120, Queue: 1000, QueueTimeout: 30 * time.Second, Pool: 60}
)

// Other defaults of [Config].
const (
	DefaultTaxTimeout       = 10 * time.Second // MC-ST-01 socket timeout
	DefaultDBTimeout        = time.Second
	DefaultReadyTimeout     = refservices.DefaultReadyTimeout
	DefaultRetryAfter       = 5 * time.Second // MC-FM-01, INV-BH-04
	DefaultRecoveryHold     = 10 * time.Second
	DefaultMaxRetries       = 3 // ADV-IR-01, INV-BH-04
	DefaultAuthBatch        = 64
	DefaultAuthBatchWriters = 2
)

// Config configures a payment-core. Zero fields take the defaults given on
// each field ([Config.SetDefaults]); a lane is defaulted as a whole when its
// Workers, Queue and Pool are all 0.
type Config struct {
	// Build is correct (BULKHEAD-PAY-001) or naive (INC-4491); default correct.
	Build refservices.Build
	// DatabaseURL is the PostgreSQL DSN; required.
	DatabaseURL string
	// TaxAPIURL is the URL POSTed to for a tax rate; empty means the tax
	// lane always answers from the cached table (logged at start).
	TaxAPIURL string
	// TaxTimeout is the tax API call's timeout; default 10s (MC-ST-01).
	TaxTimeout time.Duration
	// DBTimeout bounds each request's database work; default 1s.
	DBTimeout time.Duration
	// ReadyTimeout bounds the readiness SELECT 1; default 250ms.
	ReadyTimeout time.Duration
	// RetryAfter is the Retry-After of every rejection; default 5s.
	RetryAfter time.Duration
	// RecoveryHold is MC-ST-01's RECOVERING hold; default 10s.
	RecoveryHold time.Duration
	// MaxRetries is the highest X-Retry-Attempt accepted before 429
	// ERR_RETRY_STORM_BLOCKED (ADV-IR-01, correct build); default 3.
	MaxRetries int
	// Auth, Fraud and Tax are the correct build's lanes (75/10/40,
	// 30/5/15, 15/0/5).
	Auth, Fraud, Tax LaneConfig
	// Shared is the naive build's one pool for every lane (120 workers,
	// queue 1000 with 30 s wait, 60 connections).
	Shared LaneConfig
	// AuthBatch is the most card authorizations written by one INSERT;
	// default 64 in both builds. Above 1, AuthBatchWriters writer goroutines
	// group-commit whatever is queued on connections of the card_auth
	// lane's pool (the naive build's shared pool); 1 means one INSERT per
	// request on the request's own pooled connection.
	AuthBatch int
	// AuthBatchWriters is how many group-commit writers the card_auth lane
	// runs when AuthBatch > 1; default 2 (1 when the lane's pool has one
	// connection), at most the lane's pool.
	AuthBatchWriters int
	// FraudAsyncQueue is the capacity, in requests, of the correct build's
	// asynchronous fraud evaluation queue, to which a saturated fraud_eval
	// lane defers scoring (MC-PO-01); default 10000; -1 means no queue: a
	// saturated lane then answers 503. The naive build has none.
	FraudAsyncQueue int
	// FraudAsyncWorkers is how many background evaluators score the
	// deferred requests, each on a connection of the fraud_eval lane's
	// pool; default 2.
	FraudAsyncWorkers int
	// WatchdogInterval and WatchdogStall tune the liveness watchdog
	// (defaults 100ms and 5s).
	WatchdogInterval, WatchdogStall time.Duration
	// DebugEndpoints enables POST /debug/watchdog/stop.
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
	if c.TaxTimeout == 0 {
		c.TaxTimeout = DefaultTaxTimeout
	}
	if c.DBTimeout == 0 {
		c.DBTimeout = DefaultDBTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.RecoveryHold == 0 {
		c.RecoveryHold = DefaultRecoveryHold
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.AuthBatch == 0 {
		c.AuthBatch = DefaultAuthBatch
	}
	if c.FraudAsyncQueue == 0 {
		c.FraudAsyncQueue = DefaultFraudAsyncQueue
	}
	if c.FraudAsyncWorkers == 0 {
		c.FraudAsyncWorkers = DefaultFraudAsyncWorkers
	}
	for _, l := range []struct {
		lane *LaneConfig
		def  LaneConfig
	}{{&c.Auth, DefaultAuthLane}, {&c.Fraud, DefaultFraudLane}, {&c.Tax, DefaultTaxLane}, {&c.Shared, DefaultSharedLane}} {
		if l.lane.Workers == 0 && l.lane.Queue == 0 && l.lane.Pool == 0 {
			*l.lane = l.def
		}
		if l.lane.Queue > 0 && l.lane.QueueTimeout == 0 {
			l.lane.QueueTimeout = l.def.QueueTimeout
			if l.lane.QueueTimeout == 0 {
				l.lane.QueueTimeout = 100 * time.Millisecond
			}
		}
	}
	if c.AuthBatchWriters == 0 {
		c.AuthBatchWriters = DefaultAuthBatchWriters
		if pool := c.authLane().Pool; pool >= 1 && int32(c.AuthBatchWriters) > pool {
			c.AuthBatchWriters = int(pool)
		}
	}
}

// Validate reports every invalid field, by its flag name.
func (c Config) Validate() error {
	errs := refservices.ValidateBase(c.Build, c.DatabaseURL)
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--tax-timeout", c.TaxTimeout}, {"--db-timeout", c.DBTimeout}, {"--ready-timeout", c.ReadyTimeout},
		{"--retry-after", c.RetryAfter}, {"--recovery-hold", c.RecoveryHold}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be > 0, got %s", d.flag, d.v))
		}
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("--max-retries: must be >= 0, got %d", c.MaxRetries))
	}
	for _, l := range []struct {
		name string
		lane LaneConfig
	}{{"auth", c.Auth}, {"fraud", c.Fraud}, {"tax", c.Tax}, {"shared", c.Shared}} {
		if l.lane.Workers < 1 {
			errs = append(errs, fmt.Errorf("--%s-workers: must be >= 1, got %d", l.name, l.lane.Workers))
		}
		if l.lane.Queue < 0 {
			errs = append(errs, fmt.Errorf("--%s-queue: must be >= 0, got %d", l.name, l.lane.Queue))
		}
		if l.lane.Queue > 0 && l.lane.QueueTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--%s-queue-timeout: must be > 0, got %s", l.name, l.lane.QueueTimeout))
		}
		if l.lane.Pool < 1 {
			errs = append(errs, fmt.Errorf("--%s-pool: must be >= 1, got %d", l.name, l.lane.Pool))
		}
	}
	if c.AuthBatch < 1 {
		errs = append(errs, fmt.Errorf("--auth-batch: must be >= 1, got %d", c.AuthBatch))
	}
	if c.FraudAsyncQueue < -1 {
		errs = append(errs, fmt.Errorf("--fraud-async-queue: must be >= 1, or -1 for none, got %d", c.FraudAsyncQueue))
	}
	if c.FraudAsyncWorkers < 1 {
		errs = append(errs, fmt.Errorf("--fraud-async-workers: must be >= 1, got %d", c.FraudAsyncWorkers))
	}
	authPool, poolFlag := c.authLane().Pool, "--auth-pool"
	if c.Build == refservices.BuildNaive {
		poolFlag = "--shared-pool"
	}
	if c.AuthBatchWriters < 1 || (authPool >= 1 && int32(c.AuthBatchWriters) > authPool) {
		errs = append(errs, fmt.Errorf("--auth-batch-writers: must be between 1 and %s (%d), got %d", poolFlag, authPool, c.AuthBatchWriters))
	}
	return errors.Join(errs...)
}

// authLane is the lane card authorizations run in: card_auth, or the
// naive build's shared one (its workers and the pool they are written on).
func (c Config) authLane() LaneConfig {
	if c.Build == refservices.BuildNaive {
		return c.Shared
	}
	return c.Auth
}
