// Package standin runs the platform's stand-ins as processes of their own:
// the Toxiproxy server that carries every faulted byte, the HTTP stubs, and
// the local Services' balancers. On one machine drill's load generator
// stands in for clients on other machines, so it must keep its schedule
// while the system under test struggles; a stand-in inside drill's process
// would share the generator's Go scheduler and garbage collector and have
// its CPU charged to drill.
//
// A stand-in is drill's own binary run again (os.Executable) with
// [EnvRole] set to its role: one static binary stays enough for the
// FROM scratch images and the load workers. This package's init function
// turns such a process into the stand-in before main (or a test binary's
// TestMain) runs, so every binary that can start a stand-in can also be
// one.
//
// The protocol is JSON lines over the child's stdin and stdout:
//
//   - parent -> child: the first line is the role's setup; every later
//     line is a command ([Process.Send]).
//   - child -> parent: the first line is {"ready": ...} or {"error": "..."};
//     every later line is a [Message] stamped with the child's
//     CLOCK_MONOTONIC reading ([event.Monotonic]), which means the same
//     in every process of the machine (Go's own monotonic readings do
//     not).
//
// The child's stderr is its slog output (JSON), relayed to the parent's
// logger. A child ends when its stdin reaches end of file: when the parent
// stops it, and when the parent dies, even by SIGKILL (the kernel closes
// the pipe), so no stand-in outlives its run; the run journals each child
// for `drill cleanup` all the same.
package standin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// EnvRole is the environment variable that makes drill's binary a
// stand-in: its value is the [Role].
const EnvRole = "DRILL_STANDIN"

// Role names what a stand-in process does.
type Role string

// The roles.
const (
	// RoleToxiproxy is a Toxiproxy v2 server with drill's traffic meters
	// (internal/inject): its API on a random loopback port.
	RoleToxiproxy Role = "toxiproxy"
	// RoleStubs serves every HTTP stub dependency of a run
	// (internal/dependencies), each on its own loopback port.
	RoleStubs Role = "stubs"
	// RoleService is one local Service's balancer (internal/localenv):
	// its endpoints set by commands, its routing changes sent back as
	// messages.
	RoleService Role = "service"
)

// DefaultReadyTimeout bounds how long [Start] waits for the ready line.
const DefaultReadyTimeout = 30 * time.Second

// StopGrace is how long [Process.Stop] waits after closing stdin before it
// kills the child.
const StopGrace = 10 * time.Second

// Message is one line a stand-in sends after its ready line.
type Message struct {
	// Mono is the child's CLOCK_MONOTONIC reading (ns) when the message's
	// event happened ([event.Monotonic]).
	Mono int64 `json:"mono"`
	// Kind names the message, per role.
	Kind string `json:"kind"`
	// Data is the role's payload.
	Data json.RawMessage `json:"data,omitempty"`
}

// Config says which stand-in to start.
type Config struct {
	// Role is required.
	Role Role
	// Name tells this stand-in apart in logs and errors (a Service's
	// name); default the role.
	Name string
	// Setup is encoded as JSON on the child's first stdin line.
	Setup any
	// Ready, when not nil, receives the child's ready payload
	// (json.Unmarshal target).
	Ready any
	// OnMessage is called for every [Message], in the order the child
	// wrote them, from one goroutine; nil drops them.
	OnMessage func(Message)
	// Executable is the binary to run; default os.Executable().
	Executable string
	// ReadyTimeout bounds the wait for the ready line; 0 means
	// [DefaultReadyTimeout].
	ReadyTimeout time.Duration
	// Log receives the child's log lines and lifecycle; nil discards.
	Log *slog.Logger
}

// Process is a running stand-in. Safe for concurrent use.
type Process struct {
	role Role
	name string
	cmd  *exec.Cmd
	log  *slog.Logger

	mu    sync.Mutex
	stdin io.WriteCloser
	enc   *json.Encoder

	exited  chan struct{} // closed once Wait returned
	waitErr error
	relayed sync.WaitGroup // stdout and stderr relays
	stopped bool
	// early: the child ended before drill stopped it, at endedAt.
	early   bool
	endedAt time.Time
}

// ErrExited is returned by [Process.Send] once the child has ended.
var ErrExited = errors.New("stand-in process has exited")

// Start runs the stand-in, writes its setup and waits for its ready line.
// Errors: no executable, the process cannot start, it fails its setup (the
// child's own error), it exits or says nothing within the ready timeout;
// then nothing is left running. Cancelling ctx after Start returned does
// not stop the child: call [Process.Stop].
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Role == "" {
		return nil, errors.New("start stand-in: no role")
	}
	name := cfg.Name
	if name == "" {
		name = string(cfg.Role)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	exe := cfg.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("start stand-in %s: find drill's own binary: %w", name, err)
		}
	}
	setup, err := json.Marshal(cfg.Setup)
	if err != nil {
		return nil, fmt.Errorf("start stand-in %s: encode setup: %w", name, err)
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"drill-standin-" + string(cfg.Role)}
	cmd.Env = append(os.Environ(), EnvRole+"="+string(cfg.Role))
	// Its own process group: a terminal's ^C reaches drill, which then
	// stops the stand-ins in order (faults reverted first).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start stand-in %s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start stand-in %s: %w", name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start stand-in %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start stand-in %s: %w", name, err)
	}
	p := &Process{
		role: cfg.Role, name: name, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin),
		log:    log.With("standin", name, "pid", cmd.Process.Pid),
		exited: make(chan struct{}),
	}
	p.relayed.Add(1)
	go p.relayLog(stderr)
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 16<<20)
	ready := make(chan error, 1)
	p.relayed.Add(1)
	go p.readStdout(lines, cfg, ready)
	go func() {
		p.relayed.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = cmd.Wait()
		p.mu.Lock()
		early := !p.stopped
		p.stopped = true
		p.early, p.endedAt = early, time.Now()
		p.mu.Unlock()
		if early {
			p.log.Error("stand-in ended before drill stopped it", "err", p.waitErr)
		}
		close(p.exited)
	}()
	// A child that fails at once (not drill, a bad role) may be gone
	// before its setup is written: then its end, read below, says more
	// than the broken pipe.
	_, writeErr := stdin.Write(append(setup, '\n'))
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ready:
		if err == nil && writeErr != nil {
			err = fmt.Errorf("write setup: %w", writeErr)
		}
		if err != nil {
			p.kill()
			return nil, fmt.Errorf("start stand-in %s: %w", name, err)
		}
	case <-t.C:
		p.kill()
		return nil, fmt.Errorf("start stand-in %s: no ready line within %s", name, timeout)
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("start stand-in %s: %w", name, ctx.Err())
	}
	p.log.Debug("stand-in ready")
	return p, nil
}

// readStdout reads the ready line, then relays messages to OnMessage.
func (p *Process) readStdout(lines *bufio.Scanner, cfg Config, ready chan<- error) {
	defer p.relayed.Done()
	first := true
	for lines.Scan() {
		if first {
			first = false
			ready <- decodeReady(lines.Bytes(), cfg.Ready)
			continue
		}
		var m Message
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			p.log.Warn("stand-in wrote a line that is not a message", "line", lines.Text(), "err", err)
			continue
		}
		if cfg.OnMessage != nil {
			cfg.OnMessage(m)
		}
	}
	if first {
		err := lines.Err()
		if err == nil {
			err = errors.New("it exited before it was ready (its log says why)")
		}
		ready <- err
	}
}

// readyLine is the child's first line.
type readyLine struct {
	Ready json.RawMessage `json:"ready,omitempty"`
	Error string          `json:"error,omitempty"`
}

func decodeReady(line []byte, into any) error {
	var r readyLine
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("its first line is not a ready line: %q", line)
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	if into != nil && len(r.Ready) > 0 {
		if err := json.Unmarshal(r.Ready, into); err != nil {
			return fmt.Errorf("decode its ready line: %w", err)
		}
	}
	return nil
}

// relayLog copies the child's stderr (slog JSON lines, or a panic's text)
// into the parent's logger.
func (p *Process) relayLog(r io.Reader) {
	defer p.relayed.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		line := sc.Text()
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Msg == "" {
			p.log.Warn("stand-in output", "line", line)
			continue
		}
		level := slog.LevelInfo
		_ = level.UnmarshalText([]byte(rec.Level))
		// As a string, so the run's redaction rules read it (a
		// json.RawMessage would reach them as a list of byte values).
		p.log.Log(context.Background(), level, rec.Msg, "record", line)
	}
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Role is the stand-in's role.
func (p *Process) Role() Role { return p.role }

// Name is the stand-in's name (Config.Name or the role).
func (p *Process) Name() string { return p.name }

// Exited is closed once the child has ended and its output was read.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Send writes one command line to the child. Errors: the child has ended
// ([ErrExited]), or the line could not be written.
func (p *Process) Send(cmd any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		return fmt.Errorf("send to stand-in %s: %w", p.name, ErrExited)
	default:
	}
	if p.stopped {
		return fmt.Errorf("send to stand-in %s: %w", p.name, ErrExited)
	}
	if err := p.enc.Encode(cmd); err != nil {
		return fmt.Errorf("send to stand-in %s: %w", p.name, err)
	}
	return nil
}

// Stop closes the child's stdin, which ends it, and waits for it until
// ctx ends or [StopGrace] passes, then kills it. The error is the child's
// own failure (a non-zero exit) or that it had to be killed. Idempotent.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		_ = p.stdin.Close()
	}
	p.mu.Unlock()
	t := time.NewTimer(StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.kill()
		return fmt.Errorf("stop stand-in %s: still running %s after its stdin closed; killed", p.name, StopGrace)
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("stop stand-in %s: %w; killed", p.name, ctx.Err())
	}
	if p.waitErr != nil {
		return fmt.Errorf("stand-in %s: %w", p.name, p.waitErr)
	}
	return nil
}

// Early reports a child that ended before drill stopped it (it crashed,
// or something killed it): when (wall clock with Go's monotonic reading)
// and an error naming the stand-in, its pid and how it ended. A zero time
// and nil while it runs or once drill stopped it.
func (p *Process) Early() (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.early {
		return time.Time{}, nil
	}
	how := "exited"
	if p.waitErr != nil {
		how = p.waitErr.Error()
	}
	return p.endedAt, fmt.Errorf("stand-in %s (pid %d) ended before drill stopped it (%s)", p.name, p.cmd.Process.Pid, how)
}

// kill ends the child at once and waits for it.
func (p *Process) kill() {
	p.mu.Lock()
	p.stopped = true
	_ = p.stdin.Close()
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.exited
}
