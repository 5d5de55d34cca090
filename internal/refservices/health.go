package refservices

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Health endpoint paths of the correct builds (HEALTH-ORD-001 MC-PS-01).
const (
	PathStartup = "/healthz/startup"
	PathLive    = "/healthz/live"
	PathReady   = "/healthz/ready"
	// PathLegacy is the legacy single health path; the correct builds
	// answer it as liveness (a legacy probe path gets the safe meaning).
	PathLegacy = "/health"
)

// ADR 0077's paths for the same three meanings, served beside the ones
// above: /healthz liveness, /startupz started (503 until every readiness
// check passed once, then 200 for the process's life), /readyz readiness
// now. A Compose healthcheck asks /startupz in the ADR's decision.
const (
	PathADRLive    = "/healthz"
	PathADRStartup = "/startupz"
	PathADRReady   = "/readyz"
)

// Check is one readiness check. Run must return within its own timeout
// (e.g. [ProbeConn.Check] gives up after 250 ms); a nil error passes.
type Check struct {
	// Name labels the check in responses, logs and the
	// refsvc_readiness_check_up{check} metric.
	Name string
	// Run performs the check.
	Run func(ctx context.Context) error
}

// CheckResult is the outcome of one [Check].
type CheckResult struct {
	Name  string  `json:"name"`
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
	MS    float64 `json:"ms"` // duration of the check in ms
}

// Health serves the three endpoints of ADR 0077 / HEALTH-ORD-001 MC-PS-01:
//
//   - startup (/healthz/startup): 503 until the gate passes and every
//     readiness check has passed once, then 200 for the rest of the
//     process's life ("started");
//   - live (/healthz/live): 200 while the [Watchdog] kicks; no I/O of any
//     kind (INV-HLT-01);
//   - ready (/healthz/ready): the gate and every check now; 503 with the
//     failing ones, and 503 "draining" once [Health.Drain] was called.
//
// Readiness checks run one evaluation at a time per Health; concurrent
// probes share nothing but the checks' own serialisation. Safe for
// concurrent use.
type Health struct {
	logger   *slog.Logger
	watchdog *Watchdog
	gate     func() error
	checks   []Check

	started  atomic.Bool
	draining atomic.Bool

	mu        sync.Mutex // guards lastReady
	lastReady int        // -1 unknown, 0 unready, 1 ready

	checkUp      *prometheus.GaugeVec
	startedGauge prometheus.GaugeFunc
	watchdogAge  prometheus.GaugeFunc
	// The same two series under ADR 0077's names.
	adrCheckUp *prometheus.GaugeVec
	adrStarted prometheus.GaugeFunc
}

// NewHealth returns a Health. gate is the start-up precondition (e.g. "the
// request pool is open"); it must not do I/O; nil means none.
func NewHealth(logger *slog.Logger, wd *Watchdog, gate func() error, checks ...Check) *Health {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Health{logger: logger, watchdog: wd, gate: gate, checks: checks, lastReady: -1}
	h.checkUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "refsvc_readiness_check_up",
		Help: "1 if the readiness check passed at its last evaluation, else 0.",
	}, []string{"check"})
	h.startedGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "refsvc_started",
		Help: "1 once every readiness check has passed once (ADR 0077 started), else 0.",
	}, func() float64 {
		if h.started.Load() {
			return 1
		}
		return 0
	})
	h.adrCheckUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mowdeck_readiness_check_up",
		Help: "ADR 0077's name of refsvc_readiness_check_up: 1 if the readiness check passed at its last evaluation, else 0.",
	}, []string{"check"})
	h.adrStarted = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mowdeck_service_started",
		Help: "ADR 0077's name of refsvc_started: 1 once every readiness check has passed once, else 0.",
	}, func() float64 {
		if h.started.Load() {
			return 1
		}
		return 0
	})
	h.watchdogAge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "refsvc_watchdog_age_seconds",
		Help: "Seconds since the liveness watchdog last kicked.",
	}, func() float64 { return wd.Age().Seconds() })
	return h
}

// Collectors returns the health metrics to register.
func (h *Health) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.checkUp, h.startedGauge, h.watchdogAge, h.adrCheckUp, h.adrStarted}
}

// Started reports whether the service has started (ADR 0077).
func (h *Health) Started() bool { return h.started.Load() }

// Drain makes readiness answer 503 "draining" from now on (SIGTERM).
func (h *Health) Drain() { h.draining.Store(true) }

// Evaluate runs the gate and every check now and reports whether all
// passed. It logs readiness transitions ("service not ready" with the
// failing checks, "service ready again").
func (h *Health) Evaluate(ctx context.Context) (bool, []CheckResult) {
	results := make([]CheckResult, 0, len(h.checks)+1)
	ok := true
	if h.gate != nil {
		if err := h.gate(); err != nil {
			ok = false
			results = append(results, CheckResult{Name: "startup", Error: err.Error()})
		}
	}
	if ok {
		for _, c := range h.checks {
			t0 := time.Now()
			err := c.Run(ctx)
			r := CheckResult{Name: c.Name, OK: err == nil, MS: float64(time.Since(t0).Microseconds()) / 1000}
			up := 1.0
			if err != nil {
				r.Error = err.Error()
				ok = false
				up = 0
			}
			h.checkUp.WithLabelValues(c.Name).Set(up)
			h.adrCheckUp.WithLabelValues(c.Name).Set(up)
			results = append(results, r)
		}
	}
	h.noteReady(ok, results)
	return ok, results
}

func (h *Health) noteReady(ok bool, results []CheckResult) {
	h.mu.Lock()
	prev := h.lastReady
	if ok {
		h.lastReady = 1
	} else {
		h.lastReady = 0
	}
	h.mu.Unlock()
	switch {
	case ok && prev == 0:
		h.logger.Info("service ready again")
	case !ok && prev != 0:
		var failing []string
		for _, r := range results {
			if !r.OK {
				failing = append(failing, r.Name+": "+r.Error)
			}
		}
		h.logger.Warn("service not ready", "failing", failing)
	}
}

// TryStart evaluates readiness unless the service has already started,
// and latches started on the first full pass. It reports Started.
func (h *Health) TryStart(ctx context.Context) bool {
	if h.started.Load() {
		return true
	}
	if ok, _ := h.Evaluate(ctx); ok {
		if h.started.CompareAndSwap(false, true) {
			h.logger.Info("service started")
		}
	}
	return h.started.Load()
}

// DefaultReadinessInterval is how often [Health.RunInterval] evaluates
// readiness by default: 30 s (ADR 0077, MOWDECK_READINESS_INTERVAL_SECONDS).
const DefaultReadinessInterval = 30 * time.Second

// RunInterval evaluates readiness every interval until ctx is done; call
// it once the service has started ([Health.WaitStarted]). ADR 0077
// "Dependency trouble is still visible, just no longer through routing":
// each evaluation sets
// the readiness_check_up gauges and logs "service not ready" with the
// failing checks, and "service ready again" on recovery. It runs on the
// caller's goroutine; interval <= 0 returns at once (the ADR's 0 turns it
// off).
func (h *Health) RunInterval(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Evaluate(ctx)
		}
	}
}

// Register adds the three endpoints to mux.
func (h *Health) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathStartup, h.ServeStartup)
	mux.HandleFunc("GET "+PathLive, h.ServeLive)
	mux.HandleFunc("GET "+PathReady, h.ServeReady)
	mux.HandleFunc("GET "+PathADRStartup, h.ServeStartup)
	mux.HandleFunc("GET "+PathADRLive, h.ServeLive)
	mux.HandleFunc("GET "+PathADRReady, h.ServeReady)
}

// RegisterWithLegacy is [Health.Register] plus [PathLegacy] answered as
// liveness, as the correct builds serve it.
func (h *Health) RegisterWithLegacy(mux *http.ServeMux) {
	h.Register(mux)
	mux.HandleFunc("GET "+PathLegacy, h.ServeLive)
}

// ServeStartup answers the startup probe: 200 once started, else it tries
// to start (one readiness evaluation) and answers 503 if that fails.
func (h *Health) ServeStartup(w http.ResponseWriter, r *http.Request) {
	if h.TryStart(r.Context()) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "started"})
		return
	}
	WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
}

// ServeLive answers the liveness probe from the watchdog alone: no I/O.
func (h *Health) ServeLive(w http.ResponseWriter, _ *http.Request) {
	age := h.watchdog.Age()
	if h.watchdog.Stalled() {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "stalled", "watchdogAgeMs": age.Milliseconds()})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "live", "watchdogAgeMs": age.Milliseconds()})
}

// ServeReady answers the readiness probe with every check now; the body
// lists each check's result (HEALTH-ORD-001 DEC-HLT-01 breakdown).
func (h *Health) ServeReady(w http.ResponseWriter, r *http.Request) {
	if h.draining.Load() {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	ok, results := h.Evaluate(r.Context())
	if !ok {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unready", "checks": results})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": results})
}
