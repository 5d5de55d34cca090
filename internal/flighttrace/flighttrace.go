// Package flighttrace keeps the last seconds of drill's own Go execution
// trace in memory (runtime/trace's flight recorder) and writes them to a
// file once something worth explaining happened: for drill's developers,
// the moment a load generator first fell behind its schedule (the hidden
// --trace-late flag). `go tool trace FILE` or bench/tracelag reads it.
package flighttrace

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/trace"
	"sync"
	"time"
)

// Window is how much of the past a written trace holds at least (s);
// MaxBytes caps the recorder's memory (bytes), which may shorten it.
const (
	Window   = 5 * time.Second
	MaxBytes = 128 << 20
)

// Recorder holds a running flight recorder and the file its window goes
// to. A nil *Recorder does nothing. Safe for concurrent use.
type Recorder struct {
	fr    *trace.FlightRecorder
	path  string
	after time.Duration
	log   *slog.Logger

	once      sync.Once
	written   chan struct{} // closed when the write finished (or was skipped)
	mu        sync.Mutex
	triggered bool
	stopped   bool
}

// Start starts the flight recorder; Trigger writes its window to path,
// after more seconds past the trigger (so that the trace shows what
// followed too; at most Window). An empty path returns nil, nil. The file
// is created at once, so that a path that cannot be written fails here
// (the error names it), and removed by Stop when nothing was triggered.
// The error also says when tracing could not start (another trace
// running).
func Start(path string, after time.Duration, log *slog.Logger) (*Recorder, error) {
	if path == "" {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: Window, MaxBytes: MaxBytes})
	if err := fr.Start(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("start the runtime's flight recorder: %w", err)
	}
	return &Recorder{fr: fr, path: path, after: min(after, Window), log: log, written: make(chan struct{})}, nil
}

// Trigger asks for the window to be written, once: after the recorder's
// delay, from a goroutine of its own, so it never blocks the caller.
// reason is logged with the file's name. Later calls do nothing.
func (r *Recorder) Trigger(reason string) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.mu.Lock()
		r.triggered = true
		r.mu.Unlock()
		go func() {
			defer close(r.written)
			time.Sleep(r.after)
			r.write(reason)
		}()
	})
}

// write saves the window unless the recorder was stopped first.
func (r *Recorder) write(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	f, err := os.Create(r.path)
	if err != nil {
		r.log.Error("runtime trace not written", "file", r.path, "err", err)
		return
	}
	n, err := r.fr.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.log.Error("runtime trace not written", "file", r.path, "err", err)
		return
	}
	r.log.Warn("runtime trace written", "file", r.path, "bytes", n, "why", reason)
}

// Stop waits for a triggered write to finish (at most the recorder's
// delay), then stops the recorder; without a trigger it removes the file
// Start created. It reports whether a trace was triggered.
func (r *Recorder) Stop() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	triggered := r.triggered
	r.mu.Unlock()
	if triggered {
		<-r.written
	}
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.fr.Stop()
	if !triggered {
		if err := os.Remove(r.path); err != nil && !os.IsNotExist(err) {
			r.log.Error("could not remove the unused trace file", "file", r.path, "err", err)
		}
	}
	return triggered
}
