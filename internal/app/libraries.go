package app

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	tclog "github.com/testcontainers/testcontainers-go/log"
)

// libraryLog is where the messages of libraries that print on their own go:
// the logger of the command running now (nil: dropped).
var libraryLog atomic.Pointer[slog.Logger]

// routeOnce installs [libraryLogger] as testcontainers-go's logger once per
// process.
var routeOnce sync.Once

// routeLibraryLogs sends what testcontainers-go prints (the "Connected to
// docker" banner when drill first asks the Docker engine, reaper and wait
// notes) to logger at info level, so it shows with -v and drill's stderr
// carries only drill's output otherwise. The banner is printed through the
// library's process-wide default logger (log.Printf in DockerClient.Info),
// which no per-call option reaches, so the default is replaced once per
// process and forwards to the current command's logger.
func routeLibraryLogs(logger *slog.Logger) {
	libraryLog.Store(logger)
	routeOnce.Do(func() { tclog.SetDefault(libraryLogger{}) })
}

// libraryLogger is testcontainers-go's log.Logger writing to [libraryLog].
type libraryLogger struct{}

// Printf logs one message of testcontainers-go at info level, its lines
// joined with "; " so it stays one record.
func (libraryLogger) Printf(format string, v ...any) {
	l := libraryLog.Load()
	if l == nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(fmt.Sprintf(format, v...)), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	l.Info(strings.Join(lines, "; "), "library", "testcontainers-go")
}
