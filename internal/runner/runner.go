// Package runner carries out one drill: it brings up what the scenario
// needs, runs the plan's timeline on one clock (load streams, faults on and
// off, observers), undoes every fault on every exit path, verifies that
// nothing of the run remains, judges the assertions and returns the run
// record with its exit code (docs/DESIGN.md §3).
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/netport"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// Options configure one run.
type Options struct {
	// Scenario is loaded, defaulted and validated.
	Scenario *scenario.Scenario
	// OutDir receives the reports; "" = reports/<scenario>-<UTC time>.
	OutDir string
	// Kubeconfig, Context and Namespace follow kubectl's conventions.
	Kubeconfig, Context, Namespace string
	// StateDir holds fault journals; "" = the inject package default.
	StateDir string
	// WorkersStartMargin is, for a scenario with load.workers, how long
	// after the workers' Job is created t=0 lies (time for the pods to be
	// scheduled and started); 0 = DefaultWorkersStartMargin (30 s).
	WorkersStartMargin time.Duration
	// WorkersMaxStartLate: a load worker ready later than this after its
	// first stream's start makes the run invalid; 0 =
	// workers.DefaultMaxStartLate (10 ms).
	WorkersMaxStartLate time.Duration
	// Executable is the drill binary that runs reference services
	// (`drill serve ...`); "" = os.Executable().
	Executable string
	// Stdout receives the summary; Progress receives live progress.
	Stdout, Progress io.Writer
	// ProgressTTY updates progress in place when true.
	ProgressTTY bool
	// Hard is cancelled on a second interrupt. The run still reverts every
	// fault, stops what it started and writes its reports; nil means never
	// cancelled.
	Hard context.Context
	// Logger receives structured logs (stderr).
	Logger *slog.Logger
	// RunID overrides the generated run id (tests).
	RunID string
	// Version is drill's version, recorded in run.json.
	Version string
	// OnLive, when set, receives the run's [control.Control] once load
	// starts (t=0), from the run's goroutine; it must not block.
	OnLive func(*control.Control)
	// OnLate, when set, is called once a stream of the local load
	// generator has sent load.LateHookAfter requests late (see
	// load.Options.OnLate); drill's developers save a runtime trace then
	// (--trace-late).
	OnLate func(stream string, at time.Duration)
}

// Result is what a run produced.
type Result struct {
	// Record is the run record (also written as run.json), nil when the run
	// failed before load started.
	Record *record.Run
	// OutDir is where the reports went ("" if none were written).
	OutDir string
	// Code is the exit code (docs/DESIGN.md §11).
	Code int
}

// DefaultOutDir is reports/<scenario>-<UTC time>.
func DefaultOutDir(name string, t time.Time) string {
	return filepath.Join("reports", fmt.Sprintf("%s-%s", name, t.UTC().Format("20060102T150405Z")))
}

// Run carries out the drill. ctx is the graceful context: when it ends
// (first Ctrl-C, SIGTERM, a stop condition with action abort) the run stops
// load, reverts faults, writes reports and returns exit code 3. The
// returned error (wrapped with an exit code) explains a run that could not
// be carried out; Result.Code is always set.
func Run(ctx context.Context, opts Options) (res Result, err error) {
	r, err := newRun(opts)
	if err != nil {
		return Result{Code: exitcode.Code(err)}, err
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("panic in run; reverting faults", "panic", p)
			r.teardown()
			res = Result{Code: exitcode.CouldNotRun}
			err = exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill run: internal error: %v", p))
		}
		// Errors echo expanded values (URLs, env): they follow the
		// redaction rules like everything else the run writes.
		err = redact.Error(err, r.redactor)
	}()
	return r.run(ctx)
}

// run is one drill's state.
type run struct {
	opts  Options
	sc    *scenario.Scenario
	plan  *plan.Plan
	log   *slog.Logger
	id    string
	clock *event.Clock
	evlog *event.Log
	vars  map[string]string
	// secrets are the values read with ${env.NAME}; redactor applies the
	// redaction rules of the scenario and those values to every output.
	secrets  []string
	redactor *redact.Redactor
	env      *environment
	// journal records every fault and proxy before it is applied; stack
	// holds their reverts (LIFO), run on every exit path.
	journal *inject.Journal
	stack   *inject.Stack
	// kube is set in kubernetes runs (after preflight).
	kube *kubeEnv
	// cpu is where the CPU went while load ran; nil when not measured.
	cpu *cpuuse.Usage
	// ports hands every local replica its port: outside the ephemeral
	// range, never the same twice in a run (internal/netport).
	ports *netport.Picker
}

func newRun(opts Options) (*run, error) {
	if opts.Scenario == nil {
		return nil, exitcode.Wrap(exitcode.BadInput, errors.New("drill run: no scenario"))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Hard == nil {
		opts.Hard = context.Background()
	}
	if opts.RunID == "" {
		opts.RunID = inject.NewRunID(time.Now())
	}
	if opts.StateDir == "" {
		dir, err := inject.DefaultStateDir(os.Getenv)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("find the state directory for fault journals (set --state-dir): %w", err))
		}
		opts.StateDir = dir
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("find the drill executable: %w", err))
		}
		opts.Executable = exe
	}
	p, err := plan.Build(opts.Scenario)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("plan %s: %w", opts.Scenario.File, err))
	}
	vars, secrets := startVars(opts.Scenario, opts.RunID, os.LookupEnv)
	rd := opts.Scenario.Redactor(secrets...)
	log := slog.New(redact.Handler(opts.Logger.Handler(), rd))
	r := &run{
		opts:     opts,
		sc:       opts.Scenario,
		plan:     p,
		id:       opts.RunID,
		log:      log.With("run", opts.RunID, "scenario", opts.Scenario.Metadata.Name),
		clock:    event.NewClock(),
		evlog:    &event.Log{},
		vars:     vars,
		secrets:  secrets,
		redactor: rd,
		ports:    netport.NewPicker(),
	}
	r.stack = &inject.Stack{Log: r.log}
	return r, nil
}

// startVars are the ${...} values a scenario has before anything is
// started: ${run.id}, the ${env.NAME} it references that drill's
// environment (lookup) sets, and in kubernetes scenarios each service's
// ${services.NAME.url}. secrets are the ${env.NAME} values and, in compose
// scenarios, the sensitive environment values of the Compose file
// (redacted in everything written).
func startVars(s *scenario.Scenario, runID string, lookup func(string) (string, bool)) (vars map[string]string, secrets []string) {
	vars = s.EnvVars(lookup)
	secrets = make([]string, 0, len(vars))
	for _, v := range vars {
		secrets = append(secrets, v)
	}
	secrets = append(secrets, composeSecrets(s)...)
	vars["run.id"] = runID
	if s.Environment.Type == scenario.EnvKubernetes {
		for _, svc := range s.Services {
			vars["services."+svc.Name+".url"] = svc.URL
		}
	}
	return vars, secrets
}
