package inject

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultProcessPause, newProcessPause) }

// processPause sends SIGSTOP to a local dependency's process group and to
// every descendant (PostgreSQL's backends live in their own sessions, so the
// group alone is not enough), and SIGCONT on revert. Unlike a timeout-0
// toxic, held connections survive the pause and resume afterwards.
type processPause struct {
	fault scenario.Fault
	env   *Env
	pgid  int
}

var (
	_ Injector  = (*processPause)(nil)
	_ Describer = (*processPause)(nil)
)

// newProcessPause builds the injector of a process-pause fault that has
// passed its spec's checks ([scenario.CheckFault]); the dependency must be
// one of env.Processes.
func newProcessPause(f scenario.Fault, env *Env) (Injector, error) {
	pgid, ok := env.Processes[f.Dependency]
	if !ok {
		return nil, fmt.Errorf("dependency: %q is not a local process; known: %s", f.Dependency, mapKeys(env.Processes))
	}
	if pgid <= 1 {
		return nil, fmt.Errorf("dependency: %q has no process group (pgid %d)", f.Dependency, pgid)
	}
	return &processPause{fault: f, env: env, pgid: pgid}, nil
}

func mapKeys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// Describe implements [Describer].
func (p *processPause) Describe() string {
	return fmt.Sprintf("SIGSTOP dependency %s (process group %d and descendants)", p.fault.Dependency, p.pgid)
}

func (p *processPause) entry(op string, procs []proctree.ID) Entry {
	return Entry{
		Op: op, Key: fmt.Sprintf("%s/%d", KindProcessPause, p.pgid), Kind: KindProcessPause, Fault: p.fault.Name,
		PGID: p.pgid, Procs: procs, Dependency: p.fault.Dependency,
	}
}

// Inject implements [Injector]. It journals every process of the tree with
// its start time BEFORE stopping anything, then stops the tree, and
// journals again (same key, superseding) if stopping found processes the
// first list missed (forked meanwhile). A drill SIGKILLed during the pause
// thus leaves a journal naming every stopped process: `drill cleanup`
// continues them even when the group's leader died with drill (PostgreSQL's
// postmaster has a parent-death signal; its children, in their own
// sessions, would stay stopped forever).
func (p *processPause) Inject(ctx context.Context) (Revert, error) {
	before, err := proctree.TreeIDs(p.pgid)
	if err != nil {
		return nil, fmt.Errorf("list processes of group %d: %w", p.pgid, err)
	}
	if err := p.env.Journal.Record(p.entry(OpApply, before)); err != nil {
		return nil, fmt.Errorf("journal process pause: %w", err)
	}
	pids, stopErr := proctree.Stop(p.pgid)
	procs, changed := mergeIDs(before, proctree.IDs(pids))
	if changed {
		if err := p.env.Journal.Record(p.entry(OpApply, procs)); err != nil {
			return nil, errors.Join(fmt.Errorf("journal processes found while stopping: %w", err), p.resume(procs)(ctx))
		}
	}
	if stopErr != nil {
		return nil, errors.Join(stopErr, p.resume(procs)(ctx))
	}
	p.env.logger().Info("fault on", "fault", p.fault.Name, "what", p.Describe(), "pids", pids)
	return p.resume(procs), nil
}

// resume continues every journaled process that is still the same one
// (and the group and its current tree while the leader lives), then
// journals the revert.
func (p *processPause) resume(procs []proctree.ID) Revert {
	return func(ctx context.Context) error {
		if _, err := proctree.ContIDs(p.pgid, procs); err != nil {
			return err
		}
		if err := p.env.Journal.Record(p.entry(OpRevert, nil)); err != nil {
			return fmt.Errorf("journal revert of process pause: %w", err)
		}
		p.env.logger().Info("fault off", "fault", p.fault.Name, "what", p.Describe())
		return nil
	}
}

// mergeIDs returns a followed by the IDs of b it lacks, and whether there
// were any.
func mergeIDs(a, b []proctree.ID) ([]proctree.ID, bool) {
	have := make(map[proctree.ID]bool, len(a))
	for _, id := range a {
		have[id] = true
	}
	out := append([]proctree.ID(nil), a...)
	for _, id := range b {
		if !have[id] {
			have[id] = true
			out = append(out, id)
		}
	}
	return out, len(out) > len(a)
}
