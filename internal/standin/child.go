package standin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/drillhq/drill/internal/event"
)

// init makes this process the stand-in [EnvRole] names, before main or a
// test binary's TestMain runs: whichever binary starts a stand-in (drill,
// or a test binary of a package that runs drills) re-runs itself, and
// every such binary links this package. It never returns when EnvRole is
// set.
func init() {
	role := os.Getenv(EnvRole)
	if role == "" {
		return
	}
	os.Exit(runChild(Role(role), os.Stdin, os.Stdout, os.Stderr))
}

// handler runs one role in the child: it reads setup, calls ch.Ready once
// it serves, then serves until ctx ends (stdin closed, or SIGTERM),
// taking commands from ch.Commands; it returns once everything it started
// has stopped.
type handler func(ctx context.Context, setup json.RawMessage, ch *Child) error

// handlers maps each role to its handler.
func handlers() map[Role]handler {
	return map[Role]handler{
		RoleToxiproxy: runToxiproxy,
		RoleStubs:     runStubs,
		RoleService:   runService,
	}
}

// Child is a stand-in's side of the protocol. Safe for concurrent use.
type Child struct {
	// Log writes slog JSON lines to stderr, which the parent relays.
	Log *slog.Logger
	// Commands yields each command line after the setup, until stdin ends.
	Commands <-chan json.RawMessage

	mu    sync.Mutex
	out   *bufio.Writer
	ready bool
}

// Ready writes the ready line with payload v. Call it once.
func (c *Child) Ready(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode ready payload: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = true
	return c.writeLocked(readyLine{Ready: b})
}

// Send writes one [Message] of kind with data, stamped mono ns
// ([event.Monotonic]; 0 means now).
func (c *Child) Send(mono int64, kind string, data any) error {
	if mono == 0 {
		mono = event.Monotonic()
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", kind, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(Message{Mono: mono, Kind: kind, Data: b})
}

func (c *Child) writeLocked(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := c.out.Write(append(b, '\n')); err != nil {
		return err
	}
	return c.out.Flush()
}

// runChild is a stand-in's main: the exit code is 0 after a clean stop, 1
// after a failure (written to stderr and, before ready, as the error
// line), 2 for an unknown role or a missing setup line.
func runChild(role Role, stdin io.Reader, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ch := &Child{Log: log, out: bufio.NewWriter(stdout)}
	h, ok := handlers()[role]
	if !ok {
		_ = ch.writeLocked(readyLine{Error: fmt.Sprintf("unknown stand-in role %q", role)})
		return 2
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	if !in.Scan() {
		_ = ch.writeLocked(readyLine{Error: "no setup line on stdin"})
		return 2
	}
	setup := json.RawMessage(append([]byte(nil), in.Bytes()...))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmds := make(chan json.RawMessage, 64)
	ch.Commands = cmds
	go func() {
		// stdin's end is the parent's word to stop, or its death.
		defer cancel()
		defer close(cmds)
		for in.Scan() {
			line := append(json.RawMessage(nil), in.Bytes()...)
			select {
			case cmds <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := h(ctx, setup, ch); err != nil {
		ch.mu.Lock()
		if !ch.ready {
			_ = ch.writeLocked(readyLine{Error: err.Error()})
		}
		ch.mu.Unlock()
		log.Error("stand-in failed", "role", string(role), "err", err)
		return 1
	}
	return 0
}
