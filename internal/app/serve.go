package app

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/ordergateway"
	"github.com/drillhq/drill/internal/refservices/paymentcore"
)

// newServeCommand is `drill serve order-gateway|payment-core`: it runs one
// of the reference services in the foreground until SIGTERM or SIGINT.
func newServeCommand(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve SERVICE",
		Short: "Run a reference service (order-gateway or payment-core) as one replica",
		Long: `serve runs one of drill's reference services in the foreground: the systems
under test of drill's own drills, each with a correct build (implements the
spec) and a naive build (reproduces the incident).

  order-gateway  HEALTH-ORD-001 / ADR 0077 (naive: INC-3119)
  payment-core   BULKHEAD-PAY-001 (naive: INC-4491)

The environment supplies defaults, as the local runtime and scenarios set
them: PORT (listen on 127.0.0.1:$PORT), DATABASE_URL and, for payment-core,
TAX_API_URL. Flags win over the environment. Logs go to stderr (info level;
-vv for debug). SIGTERM drains: readiness fails, in-flight requests get
--shutdown-grace to finish.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%s needs a service: order-gateway or payment-core", cmd.CommandPath())
			}
			return fmt.Errorf("unknown service %q; available: order-gateway, payment-core", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error { return nil },
	}
	cmd.AddCommand(newServeOrderGatewayCommand(g), newServePaymentCoreCommand(g))
	return cmd
}

// serveCommon are the flags every reference service takes.
type serveCommon struct {
	build         string
	listen        string
	shutdownGrace time.Duration
	gomaxprocs    int
	// st are the service's shared settings but the build, which resolve
	// parses.
	st refservices.Settings
}

func (c *serveCommon) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.build, "build", "correct", "which build to run: correct (the spec) or naive (the incident)")
	fs.StringVar(&c.listen, "listen", "", "address to listen on (default 127.0.0.1:$PORT, else 127.0.0.1:8080)")
	fs.StringVar(&c.st.DatabaseURL, "database-url", "", "PostgreSQL DSN (default $DATABASE_URL)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", refservices.DefaultShutdownGrace, "after SIGTERM, how long in-flight requests may finish")
	fs.DurationVar(&c.st.WatchdogInterval, "watchdog-interval", refservices.DefaultWatchdogInterval, "liveness watchdog kick period")
	fs.DurationVar(&c.st.WatchdogStall, "watchdog-stall", refservices.DefaultWatchdogStall, "liveness fails when the watchdog has not kicked for this long")
	fs.DurationVar(&c.st.ReadyTimeout, "ready-timeout", refservices.DefaultReadyTimeout, "timeout of the readiness SELECT 1 on its own connection")
	fs.BoolVar(&c.st.DebugEndpoints, "debug-endpoints", false, "enable /debug/pprof/ and POST /debug/watchdog/stop (stops the watchdog: liveness fails)")
	fs.IntVar(&c.gomaxprocs, "gomaxprocs", 0, "Go's GOMAXPROCS (0: Go's default, which follows $GOMAXPROCS and the CPU quota)")
}

// resolve applies the environment defaults and parses the build.
func (c *serveCommon) resolve(cmd *cobra.Command, g *Globals) (refservices.Build, error) {
	if !cmd.Flags().Changed("database-url") {
		c.st.DatabaseURL = g.Getenv("DATABASE_URL")
	}
	// --gomaxprocs exists for experiments on small shared machines; with
	// group commit, measurements on 2 cores showed no consistent gain from
	// 1 P for 3 order-gateway replicas, and payment-core's shed and auth
	// latency were better with 2 (p99 13 ms against 20 ms shed).
	if c.gomaxprocs > 0 && (cmd.Flags().Changed("gomaxprocs") || g.Getenv("GOMAXPROCS") == "") {
		runtime.GOMAXPROCS(c.gomaxprocs)
	}
	// The reference services share a small machine with PostgreSQL and the
	// load generator in the demo drills; collecting garbage less often
	// (GOGC=400 unless $GOGC says otherwise) leaves more CPU for requests.
	if g.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if c.listen == "" {
		port := g.Getenv("PORT")
		if port == "" {
			port = "8080"
		}
		c.listen = net.JoinHostPort("127.0.0.1", port)
	}
	b, err := refservices.ParseBuild(c.build)
	if err != nil {
		return "", exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: --build: %w", cmd.CommandPath(), err))
	}
	return b, nil
}

// serveLogger is the service's stderr logger: info level by default (a
// replica's log is its evidence), debug with -vv.
func serveLogger(g *Globals, name string, build refservices.Build) (*slog.Logger, error) {
	logger, err := newLogger(g.Stderr, g.LogFormat, max(1, g.Verbosity))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, err)
	}
	return logger.With("service", name, "build", string(build), "pid", os.Getpid()), nil
}

// run resolves the common flags, builds the service called name with
// newService from the shared settings (an error there is bad input) and
// serves it on --listen until the command's context is done.
func (c *serveCommon) run(cmd *cobra.Command, g *Globals, name string,
	newService func(st refservices.Settings, logger *slog.Logger) (refservices.Service, error)) error {
	build, err := c.resolve(cmd, g)
	if err != nil {
		return err
	}
	logger, err := serveLogger(g, name, build)
	if err != nil {
		return err
	}
	st := c.st
	st.Build = build
	svc, err := newService(st, logger)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.listen, err)
	}
	if err := refservices.Serve(cmd.Context(), logger, ln, svc, c.shutdownGrace); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func newServeOrderGatewayCommand(g *Globals) *cobra.Command {
	var (
		c   serveCommon
		cfg ordergateway.Config
		pr  string
	)
	cmd := &cobra.Command{
		Use:   ordergateway.Name,
		Short: "Run order-gateway (HEALTH-ORD-001, ADR 0077; naive: INC-3119)",
		Long: `order-gateway: POST /orders {"id": "o-1", ...} writes the order to PostgreSQL.

correct: /healthz/startup (503 until the pool is open and readiness passed
once), /healthz/live (in-process watchdog, no I/O), /healthz/ready (SELECT 1
on its own connection within --ready-timeout, plus work-queue pressure per
--ready-pressure). naive: one deep /health (also every /healthz/* path)
querying through the request pool with no timeout of its own. Both: /metrics.
ADR 0077's /startupz, /healthz and /readyz are the same three. The request
pool holds --pool-size connections plus up to --pool-overflow while all are
busy (the ADR's "5 + 5" budget); once started, the correct build evaluates
readiness every --readiness-interval and logs "service not ready" / "service
ready again".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd, g, ordergateway.Name, func(st refservices.Settings, logger *slog.Logger) (refservices.Service, error) {
				cfg.Common().Set(st)
				cfg.Pressure = ordergateway.PressureMode(pr)
				if cfg.ReadinessInterval == 0 {
					cfg.ReadinessInterval = ordergateway.NoInterval // the flag's 0 turns it off
				}
				return ordergateway.New(cfg, logger)
			})
		},
	}
	fs := cmd.Flags()
	c.bind(fs)
	fs.Int32Var(&cfg.PoolSize, "pool-size", ordergateway.DefaultPoolSize, "request pool size (connections opened at start and kept)")
	fs.Int32Var(&cfg.PoolOverflow, "pool-overflow", 0, "request connections beyond --pool-size opened while all are busy, closed once --pool-size are idle (ADR 0077's size + overflow budget)")
	fs.DurationVar(&cfg.ReadinessInterval, "readiness-interval", refservices.DefaultReadinessInterval,
		"correct build: evaluate readiness this often once started, logging not ready / ready again (0: off)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 0, "concurrent orders before 503 ERR_ORDER_OVERLOADED (0: build default, correct 1024, naive unlimited; -1: unlimited)")
	fs.DurationVar(&cfg.DBTimeout, "db-timeout", 0, "deadline of each order's database work (0: build default, correct 1s, naive none; -1: none)")
	fs.IntVar(&cfg.MaxBatch, "max-batch", 0, "most orders per INSERT of the group-commit writer (0: default 64; 1: one INSERT per request, queueing for a pool connection)")
	fs.StringVar(&pr, "ready-pressure", string(ordergateway.PressureStalled),
		"work-queue pressure in readiness: stalled (>= threshold and no order written in --pressure-window), strict (>= threshold), off")
	fs.Float64Var(&cfg.PressureThreshold, "pressure-threshold", ordergateway.DefaultPressureThreshold, "in-flight fraction of --max-inflight counted as pressure")
	fs.DurationVar(&cfg.PressureWindow, "pressure-window", ordergateway.DefaultPressureWindow, "stalled mode: time without a written order that makes pressure a stall")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "extra start-up time before the first readiness pass (startup probe drills)")
	fs.Float64Var(&cfg.WarmupRate, "warmup-rate", 0, "orders/s at which a starting replica primes its cache of the orders written so far (0: no such warm-up; cold-start drills)")
	fs.DurationVar(&cfg.WarmupMax, "warmup-max", ordergateway.DefaultWarmupMax, "longest warm-up of --warmup-rate")
	fs.StringVar(&cfg.VendorURL, "vendor-url", "", "payment vendor URL every order GETs once: correct bounds it (--vendor-timeout, circuit breaker, payment_pending) and keeps it out of readiness (INV-HLT-03); naive waits with no timeout and checks it in /health")
	fs.DurationVar(&cfg.VendorTimeout, "vendor-timeout", ordergateway.DefaultVendorTimeout, "correct build: bound of each vendor call")
	return cmd
}

func newServePaymentCoreCommand(g *Globals) *cobra.Command {
	var (
		c   serveCommon
		cfg paymentcore.Config
	)
	cmd := &cobra.Command{
		Use:   paymentcore.Name,
		Short: "Run payment-core (BULKHEAD-PAY-001; naive: INC-4491)",
		Long: `payment-core: POST /auth {"card" (or "id"), "amountCents"}, POST /fraud (same),
POST /tax {"jurisdiction": "US-CA", "amountCents"}, each lane behind its own bulkhead and pool
(correct) or one shared pool (naive). The tax lane POSTs to --tax-api-url and falls
back to a certified cached rate table; a saturated fraud lane defers scoring to an
asynchronous queue and answers 202 (correct). /metrics has per-lane bulkhead metrics;
health endpoints as order-gateway's correct build (no tax API in readiness).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd, g, paymentcore.Name, func(st refservices.Settings, logger *slog.Logger) (refservices.Service, error) {
				if !cmd.Flags().Changed("tax-api-url") {
					cfg.TaxAPIURL = g.Getenv("TAX_API_URL")
				}
				cfg.Common().Set(st)
				return paymentcore.New(cfg, logger)
			})
		},
	}
	fs := cmd.Flags()
	c.bind(fs)
	fs.DurationVar(&cfg.DBTimeout, "db-timeout", paymentcore.DefaultDBTimeout, "deadline of each request's database work")
	fs.StringVar(&cfg.TaxAPIURL, "tax-api-url", "", "URL the tax lane POSTs to (default $TAX_API_URL; empty: cached table only)")
	fs.DurationVar(&cfg.TaxTimeout, "tax-timeout", paymentcore.DefaultTaxTimeout, "tax API call timeout (MC-ST-01 socket timeout)")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", paymentcore.DefaultRetryAfter, "Retry-After of every rejection")
	fs.DurationVar(&cfg.RecoveryHold, "recovery-hold", paymentcore.DefaultRecoveryHold, "MC-ST-01: time below 60 % before RECOVERING turns NORMAL")
	fs.IntVar(&cfg.MaxRetries, "max-retries", paymentcore.DefaultMaxRetries, "highest X-Retry-Attempt accepted before 429 ERR_RETRY_STORM_BLOCKED")
	fs.IntVar(&cfg.AuthBatch, "auth-batch", paymentcore.DefaultAuthBatch, "most card authorizations per INSERT of the card_auth lane's group-commit writers (1: one INSERT per request)")
	fs.IntVar(&cfg.AuthBatchWriters, "auth-batch-writers", paymentcore.DefaultAuthBatchWriters, "group-commit writers of the card_auth lane, each on a connection of the lane's pool (the naive build's shared pool)")
	fs.IntVar(&cfg.FraudAsyncQueue, "fraud-async-queue", paymentcore.DefaultFraudAsyncQueue, "correct build: capacity of the asynchronous fraud evaluation queue a saturated fraud_eval lane defers to with 202 (-1: none, answer 503)")
	fs.IntVar(&cfg.FraudAsyncWorkers, "fraud-async-workers", paymentcore.DefaultFraudAsyncWorkers, "correct build: background evaluators of the asynchronous fraud queue, on the fraud_eval lane's pool")
	laneFlags(fs, "auth", &cfg.Auth, paymentcore.DefaultAuthLane, "card_auth")
	laneFlags(fs, "fraud", &cfg.Fraud, paymentcore.DefaultFraudLane, "fraud_eval")
	laneFlags(fs, "tax", &cfg.Tax, paymentcore.DefaultTaxLane, "tax_calc")
	laneFlags(fs, "shared", &cfg.Shared, paymentcore.DefaultSharedLane, "the naive build's shared")
	return cmd
}

func laneFlags(fs *pflag.FlagSet, prefix string, lc *paymentcore.LaneConfig, def paymentcore.LaneConfig, what string) {
	fs.IntVar(&lc.Workers, prefix+"-workers", def.Workers, what+" lane: concurrent workers")
	fs.IntVar(&lc.Queue, prefix+"-queue", def.Queue, what+" lane: FIFO queue capacity (0: reject at once)")
	fs.DurationVar(&lc.QueueTimeout, prefix+"-queue-timeout", def.QueueTimeout, what+" lane: longest wait in the queue")
	fs.Int32Var(&lc.Pool, prefix+"-pool", def.Pool, what+" lane: database connections")
}
