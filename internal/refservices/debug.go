package refservices

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// RegisterPprof adds the runtime profiler under /debug/pprof/ (only with
// --debug-endpoints: profiles expose internals).
func RegisterPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// RegisterDebug adds every --debug-endpoints route: the profiler
// ([RegisterPprof]) and POST /debug/watchdog/stop, which stops wd for good
// (logged as a warning on logger) so liveness fails once the stall
// threshold passes, a simulated deadlock; it answers 200
// {"status": "watchdog stopped"}.
func RegisterDebug(mux *http.ServeMux, logger *slog.Logger, wd *Watchdog) {
	RegisterPprof(mux)
	mux.HandleFunc("POST /debug/watchdog/stop", func(w http.ResponseWriter, _ *http.Request) {
		logger.Warn("watchdog stopped by debug endpoint; liveness will fail")
		wd.Stop()
		WriteJSON(w, http.StatusOK, map[string]string{"status": "watchdog stopped"})
	})
}
