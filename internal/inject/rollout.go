package inject

import (
	"context"
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultRollout, newRollout) }

// rollout restarts every pod of a local service as a Deployment's
// rolling update does, in the background from the fault's start; its
// Revert waits for the rollout to complete.
type rollout struct {
	fault scenario.Fault
	env   *Env
	svc   PodSet
}

var (
	_ Injector  = (*rollout)(nil)
	_ Describer = (*rollout)(nil)
)

// newRollout builds the injector of a rollout fault that has passed its
// spec's checks (defaults applied); the service must be one of
// env.Services.
func newRollout(f scenario.Fault, env *Env) (Injector, error) {
	svc, ok := env.Services[f.Service]
	if !ok {
		if _, ok := env.kubeSelector(f.Service); ok {
			return &kubeRollout{fault: f, env: env, k: env.Kube}, nil
		}
		if ce, ctrs, ok := env.composeService(f.Service); ok {
			if f.MaxSurge != nil || f.MaxUnavailable != nil {
				return nil, fmt.Errorf("maxSurge, maxUnavailable: a Compose service is rolled one container after another (Compose has no surge); leave them out")
			}
			return &composeRollout{fault: f, env: env, ce: ce, ctrs: ctrs}, nil
		}
		return nil, fmt.Errorf("service: %q is not a local service of this run; known: %s", f.Service, mapKeys(env.Services))
	}
	return &rollout{fault: f, env: env, svc: svc}, nil
}

// bounds resolves maxSurge (rounded up) and maxUnavailable (rounded down)
// against the declared replicas, as the Deployment controller does.
func (r *rollout) bounds() (surge, unavailable int) {
	n := r.svc.Declared()
	ms, mu := scenario.RolloutBounds(r.fault)
	return ms.Of(n, true), mu.Of(n, false)
}

// Describe implements [Describer].
func (r *rollout) Describe() string {
	surge, unav := r.bounds()
	ms, mu := scenario.RolloutBounds(r.fault)
	return fmt.Sprintf("rolling restart of service %s's %d pods (maxSurge %s = %d, maxUnavailable %s = %d)",
		r.fault.Service, r.svc.Declared(), ms, surge, mu, unav)
}

// Inject implements [Injector]. It journals the service's pods and their
// processes, then starts the rollout and returns at once; the rollout
// goes on past ctx's end. The Revert waits for it to complete; when the
// Revert's ctx ends first, it stops the rollout where it is (the pods
// started stay, the old pods not yet deleted stay) and says so once: a
// retry finds nothing to undo.
func (r *rollout) Inject(ctx context.Context) (Revert, error) {
	surge, unav := r.bounds()
	if surge == 0 && unav == 0 {
		ms, mu := scenario.RolloutBounds(r.fault)
		return nil, fmt.Errorf("maxSurge %s and maxUnavailable %s come to 0 pods of %d", ms, mu, r.svc.Declared())
	}
	old := r.svc.LivePods()
	entry := podsEntry(OpApply, r.fault.Name, r.fault.Service, r.svc.Declared(), old, r.svc.Status(), nil)
	if err := r.env.Journal.Record(entry); err != nil {
		return nil, fmt.Errorf("journal rollout: %w", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		done <- r.svc.Rollout(rctx, localenv.RolloutOptions{
			MaxSurge: surge, MaxUnavailable: unav, Fault: r.fault.Name,
			Delete: localenv.DeleteOptions{Reason: "fault " + r.fault.Name + " (rollout)"},
		})
	}()
	r.env.logger().Info("fault on", "fault", r.fault.Name, "what", r.Describe(), "old pods", old)
	var result error
	finished, reported := false, false
	return func(ctx context.Context) error {
		if reported {
			return nil // said once; a stopped rollout leaves nothing to undo
		}
		if !finished {
			select {
			case result = <-done:
			case <-ctx.Done():
				// Stopped where it is: the service keeps the pods it has,
				// old and new, and the error says so.
				stop()
				result = fmt.Errorf("rollout of service %s did not complete by the fault's end (give the fault a longer for): %w", r.fault.Service, <-done)
			}
			finished = true
			stop()
		}
		// Done, or stopped where it was: nothing to undo either way.
		if err := r.env.Journal.Record(podsEntry(OpRevert, r.fault.Name, r.fault.Service, 0, nil, nil, nil)); err != nil {
			return errors.Join(result, fmt.Errorf("journal end of rollout: %w", err))
		}
		if result != nil {
			reported = true
			return result
		}
		r.env.logger().Info("fault off", "fault", r.fault.Name, "what", r.Describe())
		return nil
	}, nil
}
