package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/progress"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
)

func (r *run) outDir() string {
	if r.opts.OutDir == "" {
		r.opts.OutDir = DefaultOutDir(r.sc.Metadata.Name, r.clock.Start())
	}
	return r.opts.OutDir
}

// finishEarly ends a run that failed before load started: no fault was
// injected yet, so there is no verdict to report; the stack (proxies) is
// reverted by teardown.
func (r *run) finishEarly(err error) (Result, error) {
	return Result{Code: exitcode.Code(err)}, err
}

// finish judges the run, decides the exit code (record.Run.Decide: cleanup
// unverified 5 > aborted 3 > invalid 4 > failed 1 > pass 0) and writes the
// reports.
func (r *run) finish(tl *timeline, runErr, revertErr error, leftovers []inject.Leftover, verifyErr error) (Result, error) {
	// Traefik's observer stops before the record is made: its last
	// events and its validity problems belong in it.
	if r.env != nil && r.env.compose != nil && r.env.compose.stopTraefik != nil {
		r.env.compose.stopTraefik()
	}
	rec := &record.Run{
		SchemaVersion: record.SchemaVersion,
		RunID:         r.id,
		Scenario:      r.sc,
		ScenarioFile:  r.sc.File,
		Plan:          r.plan,
		StartedAt:     r.clock.Start(),
		EndedAt:       time.Now(),
		Events:        r.evlog.Events(),
		Environment:   r.environmentInfo(),
		Secrets:       r.secrets,
		CPU:           r.cpu,
	}
	// The engine handed every second to the journal; read them back.
	series, jerr := tl.journal.finish()
	if err := tl.engine.SecondsErr(); err != nil {
		jerr = errors.Join(jerr, err)
	}
	if jerr != nil {
		r.log.Error("the run journal is incomplete", "err", jerr)
		rec.Validity.Problems = append(rec.Validity.Problems, "the measured seconds could not all be kept in the run journal ("+jerr.Error()+"): the measurements are incomplete")
	}
	if series == nil {
		series = tl.engine.Series()
	}
	for _, st := range tl.streams {
		if series[st.Name] == nil {
			series[st.Name] = &measure.Series{Stream: st.Name}
		}
	}
	rec.Series = series
	r.followOperators(rec.Events)
	rec.Results = assert.Judge(r.plan, r.sc.Assertions, rec.Events, rec.Series)
	rec.ComputeFindings()
	rec.Validity.LoadBehind = record.CheckLag(r.sc, rec.Series, r.plan.Warmup, r.plan.Duration)
	rec.Validity.ConnectionErrors = record.CheckConnectionErrors(r.sc, rec.Series, r.plan.Warmup, r.plan.Duration)
	rec.Validity.Problems = append(rec.Validity.Problems, record.CheckGenerator(rec.Series, r.plan.Warmup, r.plan.Duration, openFileLimit())...)
	if tl.workers != nil {
		rec.LoadWorkers = tl.workers.reports()
		if tl.workersInvalid != nil {
			rec.Validity.Problems = append(rec.Validity.Problems, tl.workersInvalid.Error())
		}
	}
	if r.env != nil {
		rec.Validity.Problems = append(rec.Validity.Problems, r.standInsEnded()...)
		rec.Validity.Warnings = append(rec.Validity.Warnings, r.env.placement.Warnings()...)
		if r.env.compose != nil {
			rec.Validity.Warnings = append(rec.Validity.Warnings, r.env.compose.warnings...)
			rec.Validity.Problems = append(rec.Validity.Problems, r.env.compose.Problems()...)
		}
	}

	rec.Cleanup.Verified = revertErr == nil && verifyErr == nil && len(leftovers) == 0
	if !rec.Cleanup.Verified {
		url := r.toxiproxyURL()
		rec.Cleanup.Command = inject.CleanupCommand(r.id, url)
		for _, l := range leftovers {
			rec.Cleanup.Leftovers = append(rec.Cleanup.Leftovers, record.Leftover{Kind: l.Kind, Name: l.String(), Remove: rec.Cleanup.Command})
		}
		if revertErr != nil {
			rec.Cleanup.Leftovers = append(rec.Cleanup.Leftovers, record.Leftover{Kind: "revert-error", Name: revertErr.Error(), Remove: rec.Cleanup.Command})
		}
	}
	if runErr != nil {
		rec.Aborted = runErr.Error()
	}
	code, why := rec.Decide()
	rec.ExitCode = code
	var err error
	switch code {
	case exitcode.OK:
	case exitcode.CleanupUnverified:
		err = exitcode.Wrap(code, errors.New(inject.UnverifiedMessage(r.id, r.toxiproxyURL(), leftovers, errors.Join(revertErr, verifyErr))))
	case exitcode.CouldNotRun:
		err = runErr
		if exitcode.Code(err) != code {
			err = exitcode.Wrap(code, err)
		}
	default:
		err = exitcode.Wrap(code, errors.New(why))
	}
	if err != nil {
		rec.Error = err.Error()
	}

	// Reports are written after a second interrupt too: they are the only
	// account of an aborted drill, and take well under a second.
	out := Result{Record: rec, Code: code}
	dir := r.outDir()
	if werr := report.WriteAll(dir, rec); werr != nil {
		// A CI gate must not pass a run whose reports are lost.
		r.log.Error("could not write reports", "dir", dir, "err", werr)
		if code < exitcode.CouldNotRun {
			out.Code = exitcode.CouldNotRun
			err = exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("write reports to %s: %w (verdict was exit %d)", dir, werr, code))
			rec.Aborted = err.Error()
			rec.ExitCode, rec.Error = out.Code, err.Error()
		}
	} else {
		out.OutDir = dir
	}
	if serr := report.Summary(r.opts.Stdout, rec); serr != nil {
		r.log.Warn("could not print the summary", "err", serr)
	}
	if out.OutDir != "" {
		fmt.Fprintf(r.opts.Stdout, "reports: %s\n", out.OutDir)
	}
	return out, err
}

// journalHead is the header of the run's journal: what a report of a
// killed run needs besides its events and seconds.
func (r *run) journalHead() *record.Run {
	return &record.Run{
		SchemaVersion: record.SchemaVersion,
		RunID:         r.id,
		Scenario:      r.sc,
		ScenarioFile:  r.sc.File,
		Plan:          r.plan,
		StartedAt:     r.clock.Start(),
		Environment:   r.environmentInfo(),
		Secrets:       r.secrets,
	}
}

func (r *run) environmentInfo() record.Environment {
	host, _ := os.Hostname()
	env := record.Environment{
		Type:         string(r.sc.Environment.Type),
		DrillVersion: r.opts.Version,
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		CPUs:         runtime.NumCPU(),
		Hostname:     host,
		Notes:        map[string]string{},
	}
	if env.Type == "" {
		env.Type = string(scenario.EnvLocal)
	}
	if r.sc.Toxiproxy.URL != "" {
		env.ToxiproxyURL = r.sc.Toxiproxy.URL
	}
	if r.kube != nil {
		env.KubeContext, env.Namespace = r.kube.cfg.Context, r.kube.cfg.Namespace
		env.Nodes = r.kube.nodes
	}
	if r.env != nil {
		for name, pg := range r.env.postgres {
			env.Notes["postgres."+name] = string(pg.Mode)
		}
		if c := r.env.compose; c != nil && c.stack != nil && c.stack.EngineAPI != "" {
			env.Notes["docker.api"] = c.stack.EngineAPI
		}
		if r.env.placement != nil {
			env.Priority = priorityRecord(r.env.placement.Report())
		}
	}
	return env
}

func (r *run) toxiproxyURL() string {
	if r.env == nil || r.env.toxiproxy == nil || r.env.ownToxiproxy {
		return ""
	}
	return r.env.toxiproxy.APIURL()
}

// progress shows live progress until ctx ends.
func (tl *timeline) progress(ctx context.Context) {
	r := tl.r
	every := 5 * time.Second
	if r.opts.ProgressTTY {
		every = 500 * time.Millisecond
	}
	p := progress.New(r.opts.Progress, r.opts.ProgressTTY, every)
	p.Run(ctx, tl.snapshot)
}

func (tl *timeline) snapshot() progress.Snapshot {
	r := tl.r
	now := r.clock.Now()
	snap := progress.Snapshot{Elapsed: now, Total: r.plan.Duration, Phase: phaseAt(r.plan, now)}
	snap.Faults = tl.faults.active()
	snap.Streams = tl.engine.Live(5 * time.Second)
	return snap
}

// followOperators moves the plan's windows of the faults operators
// touched to their actual times (see [plan.Plan.FollowOperators]).
func (r *run) followOperators(events []event.Event) {
	r.plan.FollowOperators(r.sc.Faults, events, r.sc.Timeline.Recovery.D())
}

// phaseAt names the part of the timeline at offset now for progress lines:
// "warmup" before the measured run, the last named window holding now
// (plan order: baseline, fault and recovery windows, then the scenario's
// own), "run" between windows, and "end" once the timeline is over (load
// draining, reports).
func phaseAt(p *plan.Plan, now time.Duration) string {
	switch {
	case now < p.Warmup:
		return "warmup"
	case now >= p.Duration:
		return "end"
	}
	phase := "run"
	for _, w := range p.Windows {
		if w.Name != "run" && now >= w.Start && now < w.End {
			phase = w.Name
		}
	}
	return phase
}

// priorityRecord is run.json's account of the run's CPU placement.
func priorityRecord(rep placement.Report) *record.Priority {
	p := &record.Priority{Mode: string(rep.Mode), Cgroup: rep.Cgroup, WeightFile: rep.WeightFile,
		SUTWeight: rep.SUTWeight, DrillWeight: rep.DrillWeight, Nice: rep.Nice, NoCgroup: rep.NoCgroup, Summary: rep.Line}
	for _, l := range rep.Limits {
		p.Limits = append(p.Limits, record.CPULimit{Service: l.Service, CPU: l.CPU, Cores: l.Cores,
			QuotaMicros: l.QuotaMicros, PeriodMicros: l.PeriodMicros, Applied: l.Applied})
	}
	return p
}
