package inject

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/inject/proctree"
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

func newProcessPause(f scenario.Fault, env *Env) (Injector, error) {
	if err := pauseFields(f); err != nil {
		return nil, err
	}
	pgid, ok := env.Processes[f.Dependency]
	if !ok {
		return nil, fmt.Errorf("dependency: %q is not a local process; known: %s", f.Dependency, mapKeys(env.Processes))
	}
	if pgid <= 1 {
		return nil, fmt.Errorf("dependency: %q has no process group (pgid %d)", f.Dependency, pgid)
	}
	return &processPause{fault: f, env: env, pgid: pgid}, nil
}

// pauseFields checks the fields of process-pause and container-pause.
func pauseFields(f scenario.Fault) error {
	if err := onlyFields(f); err != nil {
		return err
	}
	if f.Dependency == "" {
		return fmt.Errorf("dependency: required for %s", f.Type)
	}
	if f.Proxy != "" || f.Stream != "" || f.Toxicity != nil {
		return fmt.Errorf("proxy, stream and toxicity do not apply to %s (it freezes the whole dependency)", f.Type)
	}
	return nil
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

func (p *processPause) entry(op string) Entry {
	return Entry{
		Op: op, Key: fmt.Sprintf("%s/%d", KindProcessPause, p.pgid), Kind: KindProcessPause, Fault: p.fault.Name,
		PGID: p.pgid, Dependency: p.fault.Dependency,
	}
}

// Inject implements [Injector].
func (p *processPause) Inject(ctx context.Context) (Revert, error) {
	if err := p.env.Journal.Record(p.entry(OpApply)); err != nil {
		return nil, fmt.Errorf("journal process pause: %w", err)
	}
	pids, err := proctree.Stop(p.pgid)
	if err != nil {
		return nil, errors.Join(err, p.resume(pids)(ctx))
	}
	p.env.logger().Info("fault on", "fault", p.fault.Name, "what", p.Describe(), "pids", pids)
	return p.resume(pids), nil
}

func (p *processPause) resume(pids []int) Revert {
	return func(ctx context.Context) error {
		if err := proctree.Cont(p.pgid, pids); err != nil {
			return err
		}
		if err := p.env.Journal.Record(p.entry(OpRevert)); err != nil {
			return fmt.Errorf("journal revert of process pause: %w", err)
		}
		p.env.logger().Info("fault off", "fault", p.fault.Name, "what", p.Describe())
		return nil
	}
}
