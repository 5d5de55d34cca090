package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/flighttrace"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// Globals is the process boundary and the global flags, handed to every
// command constructor. Commands write program output to Stdout, messages
// and logs to Stderr (through Logger), and never call os.Exit.
type Globals struct {
	// Stdout receives program output (reports, plans, schemas).
	Stdout io.Writer
	// Stderr receives logs and errors.
	Stderr io.Writer
	// Stdin is read by "drill validate -"; nil means os.Stdin.
	Stdin io.Reader
	// Logger writes to Stderr in LogFormat at the level set by Verbosity.
	// Set before any command runs.
	Logger *slog.Logger
	// Kubeconfig is --kubeconfig; empty means $KUBECONFIG (a path list),
	// else ~/.kube/config, as kubectl does.
	Kubeconfig string
	// Context is --context, the kubeconfig context; empty means the
	// current one. A scenario's allowedContexts must list it.
	Context string
	// Namespace is -n/--namespace; empty means the scenario's namespace.
	Namespace string
	// Out is --out, the directory reports are written under.
	Out string
	// LogFormat is --log-format: text or json.
	LogFormat string
	// Verbosity is the count of -v: 0 warnings, 1 info, 2 or more debug.
	Verbosity int
	// Version is drill's version (set at build time).
	Version string
	// Getenv reads the environment (os.Getenv in production).
	Getenv func(string) string
	// Hard is cancelled on a second interrupt. drill run still reverts its
	// faults, stops what it started and writes its reports; drill agent
	// stops at once. nil: never cancelled.
	Hard context.Context
	// CPUProfile is the hidden --cpuprofile flag: a file that receives a
	// pprof CPU profile of the whole command (for drill's developers).
	CPUProfile string
	// MemProfile is the hidden --memprofile flag: a file that receives the
	// heap profile (allocations since start: alloc_objects, alloc_space)
	// when the command ends.
	MemProfile string
	// TraceLate is the hidden --trace-late flag: a file that receives the
	// last seconds of drill's Go execution trace when a load stream first
	// falls behind its schedule (load.LateHookAfter late requests; for
	// drill's developers). Nothing is written when none does.
	TraceLate string

	lateTrace *flighttrace.Recorder // running while a command runs with TraceLate
	// lateHooked: a command handed the trace's hook to a load generator.
	lateHooked bool
}

// onLate is the load generator's hook for --trace-late: it triggers the
// flight recorder's write; nil without the flag.
func (g *Globals) onLate() func(stream string, at time.Duration) {
	if g.lateTrace == nil {
		return nil
	}
	g.lateHooked = true
	return func(stream string, at time.Duration) {
		g.lateTrace.Trigger(fmt.Sprintf("stream %s: %d requests late, the last due at t=%s", stream, load.LateHookAfter, at.Round(time.Millisecond)))
	}
}

// commands lists drill's subcommands in help order. To add one, write
// internal/app/<cmd>.go with func new<Cmd>Command(g *Globals) *cobra.Command
// and add one line here.
func commands() []func(*Globals) *cobra.Command {
	return []func(*Globals) *cobra.Command{
		newRunCommand,
		newLoadCommand,
		newValidateCommand,
		newPlanCommand,
		newSchemaCommand,
		newServeCommand,
		newProbeCommand,
		newAgentCommand,
		newWorkerCommand,
		newCleanupCommand,
		newReportCommand,
		newCompareCommand,
		newExportCommand,
		newHistoryCommand,
		newVersionCommand,
	}
}

// Run parses args, runs the chosen command and returns its error (nil on
// success). Usage mistakes come back with exit code 2. It never exits the
// process and prints nothing but what the command prints.
func Run(ctx context.Context, g *Globals, args []string) error {
	if g.Getenv == nil {
		g.Getenv = func(string) string { return "" }
	}
	if g.Logger == nil {
		g.Logger = slog.New(slog.DiscardHandler)
	}
	started := false
	root := newRootCommand(g, &started)
	root.SetArgs(args)
	root.SetOut(g.Stdout)
	root.SetErr(g.Stderr)
	var stopProfile func()
	root.PersistentPreRunE = chainPreRun(root.PersistentPreRunE, func() error {
		var err error
		if stopProfile, err = startCPUProfile(g.CPUProfile); err != nil {
			return err
		}
		// The trace shows what happened up to 2 s after the trigger.
		if g.lateTrace, err = flighttrace.Start(g.TraceLate, 2*time.Second, g.Logger); err != nil {
			return fmt.Errorf("--trace-late: %w", err)
		}
		return nil
	})
	cmd, err := root.ExecuteContextC(ctx)
	if stopProfile != nil {
		stopProfile()
	}
	if err := writeMemProfile(g.MemProfile); err != nil {
		g.Logger.Warn("--memprofile", "err", err)
	}
	if g.lateTrace != nil && !g.lateTrace.Stop() && g.lateHooked {
		g.Logger.Warn("--trace-late: no stream fell behind; no trace written", "file", g.TraceLate)
	}
	if err != nil && !started && exitcode.Code(err) == exitcode.CouldNotRun {
		// cobra failed before any command ran: unknown command or flag,
		// wrong number of arguments.
		name := "drill"
		if cmd != nil {
			name = cmd.CommandPath()
		}
		return &usageError{command: name, err: err}
	}
	return err
}

func newRootCommand(g *Globals, started *bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "drill",
		Short: "Chaos drills and load tests with a CI-trustworthy verdict",
		Long: `drill runs a chaos drill described in a YAML scenario: it starts what the
scenario needs, drives open-model load at exact rates, injects faults through
Toxiproxy on a timeline, watches the system, removes every fault it injected,
and judges the scenario's assertions.

Exit codes: 0 passed, 1 an assertion failed, 2 bad input or usage (nothing
touched), 3 could not run, 4 invalid measurement, 5 cleanup unverified.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			logger, err := newLogger(g.Stderr, g.LogFormat, g.Verbosity)
			if err != nil {
				return &usageError{command: cmd.CommandPath(), err: err}
			}
			g.Logger = logger
			routeLibraryLogs(logger)
			*started = true
			return nil
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{command: c.CommandPath(), err: err}
	})
	f := root.PersistentFlags()
	f.StringVar(&g.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&g.Context, "context", "", "kubeconfig context to use (must be in the scenario's allowedContexts)")
	f.StringVarP(&g.Namespace, "namespace", "n", "", "namespace to use (must be in the scenario's allowedNamespaces)")
	f.StringVar(&g.Out, "out", "reports", "directory for the reports (run: default reports/<scenario>-<UTC time>; report: default beside run.json)")
	f.StringVar(&g.LogFormat, "log-format", "text", "log format on stderr: text or json")
	f.CountVarP(&g.Verbosity, "verbose", "v", "more log output (-v info, -vv debug)")
	f.StringVar(&g.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the command to this file ({pid} becomes the process id)")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&g.MemProfile, "memprofile", "", "write a pprof heap profile (allocations since start) to this file when the command ends")
	_ = f.MarkHidden("memprofile")
	f.StringVar(&g.TraceLate, "trace-late", "", "write the last seconds of drill's Go execution trace to this file when a load stream first falls behind its schedule")
	_ = f.MarkHidden("trace-late")
	for _, newCmd := range commands() {
		root.AddCommand(newCmd(g))
	}
	return root
}

// newLogger builds the stderr logger for --log-format and -v; every record
// follows the default redaction rules (internal/redact).
func newLogger(w io.Writer, format string, verbosity int) (*slog.Logger, error) {
	level := slog.LevelWarn
	switch {
	case verbosity == 1:
		level = slog.LevelInfo
	case verbosity >= 2:
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(redact.Handler(slog.NewTextHandler(w, opts), nil)), nil
	case "json":
		return slog.New(redact.Handler(slog.NewJSONHandler(w, opts), nil)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q; known: json, text", format)
}

// loadScenario reads, defaults and validates a scenario; bad input comes
// back with exit code 2 and the located errors.
func loadScenario(path string) (*scenario.Scenario, error) {
	s, err := scenario.Load(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, err)
	}
	return s, nil
}

// readScenario loads the scenario at path, or from g's standard input when
// path is "-" (named <stdin> in messages; relative paths resolve against
// the working directory). It returns the name to print for it. Errors
// carry exit code 2.
func readScenario(g *Globals, path string) (*scenario.Scenario, string, error) {
	if path != "-" {
		s, err := loadScenario(path)
		return s, path, err
	}
	in := g.Stdin
	if in == nil {
		in = os.Stdin
	}
	s, err := scenario.LoadReader(stdinName, in)
	if err != nil {
		return nil, stdinName, exitcode.Wrap(exitcode.BadInput, err)
	}
	return s, stdinName, nil
}

// exactArgs is cobra.ExactArgs naming the argument.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d argument (%s), got %d", cmd.CommandPath(), n, what, len(args))
		}
		return nil
	}
}

// chainPreRun runs first, then (if it succeeded) next.
func chainPreRun(first func(*cobra.Command, []string) error, next func() error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := first(cmd, args); err != nil {
			return err
		}
		if err := next(); err != nil {
			return &usageError{command: cmd.CommandPath(), err: err}
		}
		return nil
	}
}

// writeMemProfile writes the heap profile to path (nothing when path is
// empty): every sampled allocation since the process started, for
// `go tool pprof -sample_index=alloc_objects`. The error is the file's.
func writeMemProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile starts a pprof CPU profile into path (nothing when path is
// empty; "{pid}" in it becomes the process id) and returns the function that stops it and closes the file. It
// returns an error when the file cannot be created or profiling is already
// on.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	path = strings.ReplaceAll(path, "{pid}", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
