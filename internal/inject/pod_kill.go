package inject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultPodKill, newPodKill) }

// podKill deletes some pods of a local service as the API server deletes
// a ReplicaSet's pods; the service replaces each in its slot. A kill is
// not undone: its Revert waits for the ended pods' processes to be reaped
// and closes the journal entry.
type podKill struct {
	fault scenario.Fault
	env   *Env
	svc   PodSet
	// seed of the random choice (count, percent): the fault's, or drawn
	// by the constructor; nil for named pods.
	seed *int64
}

var (
	_ Injector  = (*podKill)(nil)
	_ Describer = (*podKill)(nil)
)

// newPodKill builds the injector of a pod-kill fault that has passed its
// spec's checks; the service must be one of env.Services. Without a seed
// of its own, a random choice gets one drawn here, which Describe, the
// journal and the pods' Killing events record.
func newPodKill(f scenario.Fault, env *Env) (Injector, error) {
	svc, ok := env.Services[f.Service]
	if !ok {
		if sel, ok := env.kubeSelector(f.Service); ok {
			return newKubePodKill(f, env, sel), nil
		}
		if ce, ctrs, ok := env.composeService(f.Service); ok {
			return newComposePodKill(f, env, ce, ctrs)
		}
		if f.Evict != nil {
			return nil, fmt.Errorf("evict: applies only to a service of a kubernetes run")
		}
		return nil, fmt.Errorf("service: %q is not a local service of this run; known: %s", f.Service, mapKeys(env.Services))
	}
	if f.Evict != nil {
		return nil, fmt.Errorf("evict: applies only to a service of a kubernetes run, not to local service %s", f.Service)
	}
	p := &podKill{fault: f, env: env, svc: svc}
	if len(f.Pods) == 0 {
		seed := rand.Int64()
		if f.Seed != nil {
			seed = *f.Seed
		}
		p.seed = &seed
	}
	return p, nil
}

// Describe implements [Describer].
func (p *podKill) Describe() string {
	how := "SIGTERM with the grace period"
	if p.fault.Signal == scenario.SignalKill {
		how = "SIGKILL"
	}
	which := choiceDescribe(p.fault, p.seed, "pod")
	return fmt.Sprintf("delete %s of service %s (%s); each is replaced in its slot", which, p.fault.Service, how)
}

// ChoosePods returns n of live (pod names in slot order), chosen at
// random with seed: the same seed and pods give the same choice. The
// result keeps live's order; n above len(live) chooses them all.
func ChoosePods(live []string, n int, seed int64) []string {
	n = min(max(n, 0), len(live))
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	idx := r.Perm(len(live))[:n]
	slices.Sort(idx)
	out := make([]string, n)
	for i, k := range idx {
		out[i] = live[k]
	}
	return out
}

// resolveNamed maps each named pod (s-i, as the scenario names replica i)
// to the live pod of its slot: s-i itself, or the pod that replaced it
// (s-i-r<n>). Errors name a pod with no live pod in its slot.
func resolveNamed(names, live []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if slices.Contains(live, n) {
			out = append(out, n)
			continue
		}
		i := slices.IndexFunc(live, func(l string) bool { return strings.HasPrefix(l, n+"-r") })
		if i < 0 {
			return nil, fmt.Errorf("no live pod %s (nor one that replaced it); live: %s", n, strings.Join(live, ", "))
		}
		out = append(out, live[i])
	}
	return out, nil
}

// choose returns the pods the fault ends, among the live ones now.
func (p *podKill) choose() ([]string, error) {
	live := p.svc.LivePods()
	f := p.fault
	switch {
	case len(f.Pods) > 0:
		return resolveNamed(f.Pods, live)
	case f.Percent != nil:
		return ChoosePods(live, (p.svc.Declared()*(*f.Percent)+99)/100, *p.seed), nil
	}
	return ChoosePods(live, *f.Count, *p.seed), nil
}

// Inject implements [Injector]. It chooses the pods, journals them with
// the service's processes, then deletes each (its replacement starts at
// once).
func (p *podKill) Inject(ctx context.Context) (Revert, error) {
	pods, err := p.choose()
	if err != nil {
		return nil, fmt.Errorf("choose pods of service %s: %w", p.fault.Service, err)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("choose pods of service %s: no live pod", p.fault.Service)
	}
	declared := p.svc.Declared()
	if err := p.env.Journal.Record(podsEntry(OpApply, p.fault.Name, p.fault.Service, declared, pods, p.svc.Status(), p.seed)); err != nil {
		return nil, fmt.Errorf("journal pod-kill: %w", err)
	}
	reason := "fault " + p.fault.Name + " (pod-kill"
	if p.seed != nil {
		reason += fmt.Sprintf(", seed %d", *p.seed)
	}
	reason += ")"
	o := localenv.DeleteOptions{Kill: p.fault.Signal == scenario.SignalKill, Reason: reason}
	var errs []error
	var repl []string
	for _, pod := range pods {
		r, err := p.svc.DeletePod(pod, o, p.fault.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		repl = append(repl, r)
	}
	// The replacements' processes, journaled too (same key, superseding).
	if err := p.env.Journal.Record(podsEntry(OpApply, p.fault.Name, p.fault.Service, declared, pods, p.svc.Status(), p.seed)); err != nil {
		errs = append(errs, fmt.Errorf("journal pod-kill: %w", err))
	}
	revert := p.wait(pods)
	if len(errs) > 0 {
		// What was deleted stays deleted; the revert still waits for it.
		return revert, errors.Join(errs...)
	}
	p.env.logger().Info("fault on", "fault", p.fault.Name, "what", p.Describe(), "pods", pods, "replacements", repl)
	return revert, nil
}

// wait is the Revert: a kill cannot be undone, so it waits for the ended
// pods' processes to be reaped (bounded by ctx) and closes the journal
// entry.
func (p *podKill) wait(pods []string) Revert {
	return func(ctx context.Context) error {
		if err := p.svc.WaitGone(ctx, pods...); err != nil {
			return err
		}
		if err := p.env.Journal.Record(podsEntry(OpRevert, p.fault.Name, p.fault.Service, 0, nil, nil, nil)); err != nil {
			return fmt.Errorf("journal end of pod-kill: %w", err)
		}
		p.env.logger().Info("fault off", "fault", p.fault.Name, "what", p.Describe())
		return nil
	}
}
