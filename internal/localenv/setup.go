package localenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/redact"
)

// DefaultSetupTimeout bounds a setup step that names no timeout.
const DefaultSetupTimeout = 5 * time.Minute

// setupTailLines is how many last lines of a failed setup's output its
// error shows.
const setupTailLines = 10

// SetupSpec is a one-shot step of a service (migrations, seeding), run once
// before its replicas start, like an init container.
type SetupSpec struct {
	// Service names the service the step belongs to; required.
	Service string
	// Command is argv; required. Resolved with $PATH when it has no slash.
	Command []string
	// Env is the complete environment (KEY=VALUE).
	Env []string
	// Dir is the working directory; default the current one.
	Dir string
	// Timeout bounds the run; 0 means [DefaultSetupTimeout].
	Timeout time.Duration
	// LogPath is the file that receives stdout and stderr (created, or
	// appended to, with its directory); "" keeps only the last lines in
	// memory.
	LogPath string
	// Redact, when set, redacts each line before it reaches LogPath (the
	// step's arguments and output may carry the secrets its env holds).
	Redact *redact.Redactor
}

// RunSetup runs spec's command once, in its own process group with SIGKILL
// as its parent-death signal, and returns nil when it exits 0. Whatever
// is left of its process group when it exits is killed, so nothing of it
// outlives the step. It emits a note event with the service's name when
// the step starts and when it ends (Reason "Setup", "SetupFailed").
//
// Errors name the service and, but for a bad spec, show the last lines of
// the output and where the whole log is: the command could not be started,
// it exited non-zero or was killed, it ran past the timeout (it is killed),
// or ctx ended first (it is killed).
func RunSetup(ctx context.Context, clock *event.Clock, sink event.Sink, spec SetupSpec, log *slog.Logger) (err error) {
	if spec.Service == "" {
		return errors.New("setup: service name is empty")
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return fmt.Errorf("setup of service %s: command is empty", spec.Service)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if sink == nil {
		sink = event.SinkFunc(func(event.Event) {})
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultSetupTimeout
	}
	var file *os.File
	if spec.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
			return fmt.Errorf("setup of service %s: create its log directory: %w", spec.Service, err)
		}
		file, err = os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("setup of service %s: open its log: %w", spec.Service, err)
		}
		defer func() {
			if cerr := file.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("setup of service %s: close its log %s: %w", spec.Service, spec.LogPath, cerr)
			}
		}()
	}
	var out *logSink
	switch {
	case file != nil && spec.Redact != nil:
		lw := redact.NewLineWriter(file, spec.Redact)
		defer func() {
			if ferr := lw.Flush(); ferr != nil && err == nil {
				err = fmt.Errorf("setup of service %s: write its log %s: %w", spec.Service, spec.LogPath, ferr)
			}
		}()
		out = newLogSink(lw, nil, DefaultLogLines)
	case file != nil:
		out = newLogSink(file, nil, DefaultLogLines)
	default:
		out = newLogSink(nil, nil, DefaultLogLines)
	}
	emit := func(reason, detail string) {
		sink.Emit(event.Event{At: clock.Now(), Kind: event.Note, Source: DefaultSource, Service: spec.Service,
			Reason: reason, Detail: detail})
	}
	seq := out.mark(fmt.Sprintf("[drill] %s setup of service %s: %s", time.Now().Format(time.RFC3339Nano),
		spec.Service, strings.Join(spec.Command, " ")))

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 2 * time.Second
	// The setup step runs before load, where drill is (not placed).
	sp, err := newSpawner(nil)
	if err != nil {
		return fmt.Errorf("setup of service %s: %w", spec.Service, err)
	}
	defer sp.close()
	begin := time.Now()
	log.Info("running setup", "service", spec.Service, "timeout", timeout)
	emit("Setup", "setup started")
	if err := sp.start(cmd); err != nil {
		out.mark("[drill] " + err.Error())
		emit("SetupFailed", "setup could not be started: "+err.Error())
		return fmt.Errorf("setup of service %s: start %s: %w", spec.Service, spec.Command[0], err)
	}
	pid := cmd.Process.Pid

	// Kill the group when ctx ends or the timeout passes, but never after
	// the process was reaped (its group id may then be reused).
	var mu sync.Mutex
	reaped := false
	var why error
	done := make(chan struct{})
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-tctx.Done():
			mu.Lock()
			if !reaped {
				why = tctx.Err()
				if ctx.Err() != nil {
					why = ctx.Err()
				}
				_ = killGroup(pid, syscall.SIGKILL)
			}
			mu.Unlock()
		case <-done:
		}
	}()
	var info unix.Siginfo
	for {
		if werr := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); werr != unix.EINTR {
			break
		}
	}
	mu.Lock()
	_ = killGroup(pid, syscall.SIGKILL) // what it left behind
	reaped = true
	killedFor := why
	mu.Unlock()
	close(done)
	werr := cmd.Wait()
	took := time.Since(begin).Round(time.Millisecond)
	exit := describeExit(cmd, werr)
	out.mark(fmt.Sprintf("[drill] setup %s after %s", exit, took))

	var cause string
	switch {
	case errors.Is(killedFor, context.DeadlineExceeded):
		cause = fmt.Sprintf("did not finish within its timeout %s and was killed", timeout)
	case killedFor != nil:
		cause = fmt.Sprintf("was interrupted (%v) and killed after %s", killedFor, took)
	case cmd.ProcessState != nil && cmd.ProcessState.Success():
		log.Info("setup done", "service", spec.Service, "took", took)
		emit("Setup", fmt.Sprintf("setup %s after %s", exit, took))
		return nil
	default:
		cause = fmt.Sprintf("failed: %s after %s", exit, took)
	}
	emit("SetupFailed", "setup "+cause)
	var b strings.Builder
	fmt.Fprintf(&b, "setup of service %s %s", spec.Service, cause)
	lines := out.since(seq)
	if len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "[drill] setup ") {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > setupTailLines {
		lines = lines[len(lines)-setupTailLines:]
	}
	where := ""
	if spec.LogPath != "" {
		where = " (all of it in " + spec.LogPath + ")"
	}
	if len(lines) == 0 {
		fmt.Fprintf(&b, "; it wrote no output%s", where)
	} else {
		fmt.Fprintf(&b, "; its last lines of output%s:", where)
		for _, l := range lines {
			fmt.Fprintf(&b, "\n  | %s", l)
		}
	}
	return errors.New(b.String())
}
