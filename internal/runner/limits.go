package runner

import (
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
)

// tuneProcess prepares drill's own process for a run: it raises the
// open-files soft limit to the hard limit (every in-flight request, proxied
// connection and replica holds descriptors) and, unless GOGC is set, makes
// the garbage collector run less often (GOGC=400): the harness shares the
// machine with the system under test, and CPU spent on collection shows up
// as dispatch lag.
func tuneProcess(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		old := lim.Cur
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("could not raise the open-files limit", "limit", old, "err", err)
		}
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// openFileLimit is the process's open-files soft limit, 0 when it cannot
// be read.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}
