package localenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/drillhq/drill/internal/event"
)

// Reasons of the events a Service emits while it replaces its pods, as the
// Kubernetes controllers name theirs.
const (
	// ReasonScaling is the K8sEvent of each rollout step (the Deployment
	// controller's ScalingReplicaSet): Labels["step"] is "up" (a new pod
	// started) or "down" (an old pod deleted).
	ReasonScaling = "ScalingReplicaSet"
	// ReasonRolloutComplete is the Note that ends a rollout: every slot
	// has its new pod ready and every old pod is gone.
	ReasonRolloutComplete = "RolloutComplete"
)

// emit sends a Service-level event (not one replica's own), stamped now.
func (s *Service) emit(e event.Event) {
	if s.sink == nil {
		return
	}
	e.At = s.clock.Now()
	e.Source = s.opt.Source
	e.Service = s.spec.Name
	s.sink.Emit(e)
}

// nextGenLocked is the generation of the next pod of slot: one above
// every pod the slot had so far.
func (s *Service) nextGenLocked(slot int) int {
	gen := 0
	for _, p := range s.pods {
		if p.slot == slot {
			gen = max(gen, p.gen+1)
		}
	}
	if g, ok := s.gens[slot]; ok {
		gen = max(gen, g+1)
	}
	return gen
}

// create starts the next pod of slot, replacing, for reason, and says so
// with a PodCreated event. Callers hold s.addMu.
func (s *Service) create(slot int, reason, fault string) (*pod, error) {
	s.mu.Lock()
	gen := s.nextGenLocked(slot)
	if s.gens == nil {
		s.gens = map[int]int{}
	}
	s.gens[slot] = gen
	s.mu.Unlock()
	s.emit(event.Event{Kind: event.PodCreated, Pod: PodName(s.spec.Name, slot, gen), Reason: reason, Fault: fault})
	return s.startPod(slot, gen)
}

// remove deletes p as o says and, once its processes are reaped, takes
// it off the Service (EndpointRemoved) and emits PodDeleted.
func (s *Service) remove(p *pod, o DeleteOptions, fault string) {
	o.Fault = fault
	p.r.Delete(o)
	go func() {
		<-p.r.Done()
		name := p.r.Pod()
		// A pod that ended before the proxies learnt of its deletion is
		// still routed until then (connections to it fail).
		s.waitLag(name)
		// Endpoint and pod gone, said in this order, before whoever waits
		// for the pod (WaitGone, Rollout) sees it gone.
		s.proxy.RemoveEndpoint(name)
		if s.listener != nil {
			s.listener.RemoveEndpoint(name)
		}
		why := "deleted"
		if o.Reason != "" {
			why += ": " + o.Reason
		}
		s.emit(event.Event{Kind: event.PodDeleted, Pod: name, Reason: why, Fault: fault,
			Detail: describeTermination(p.r.Status().LastTerminated)})
		s.mu.Lock()
		delete(s.deleted, name)
		s.pods = slices.DeleteFunc(s.pods, func(q *pod) bool { return q == p })
		s.changedLocked()
		s.mu.Unlock()
	}()
}

// describeTermination says how a container ended, e.g. "killed by
// signal SIGKILL (exit code 137)" or "exited with code 0".
func describeTermination(t *Termination) string {
	switch {
	case t == nil:
		return "no container ran"
	case t.Signal != 0:
		return fmt.Sprintf("killed by signal %s (exit code %d)", unix.SignalName(syscall.Signal(t.Signal)), t.ExitCode)
	}
	return fmt.Sprintf("exited with code %d", t.ExitCode)
}

// livePod returns the pod named name unless it is being deleted.
func livePod(pods []*pod, name string) *pod {
	for _, p := range pods {
		if p.r.Pod() == name && !p.r.Status().Terminating {
			return p
		}
	}
	return nil
}

// LivePods returns the names of the pods that are not being deleted, in
// slot order: the declared replicas a ReplicaSet would count.
func (s *Service) LivePods() []string {
	pods, _ := s.snapshot()
	var out []string
	for _, p := range pods {
		if !p.r.Status().Terminating {
			out = append(out, p.r.Pod())
		}
	}
	return out
}

// DeletePod deletes pod as the API server deletes a pod of a ReplicaSet,
// and the ReplicaSet replaces it: the pod turns terminating at once (its
// endpoint is no longer ready; see [Replica.Delete] for o) and a new pod
// starts in its slot (same $REPLICA_INDEX, a port of its own, named by
// [PodName]), unready until its startup and readiness probes pass. It
// returns the replacement's name once that has started; the deleted pod
// leaves the Service when its processes are reaped ([Service.WaitGone]).
// fault names the fault on the events. Errors: no live pod of that name
// (the error lists them), or the replacement could not be started (the
// deleted pod ends anyway).
func (s *Service) DeletePod(name string, o DeleteOptions, fault string) (replacement string, err error) {
	s.addMu.Lock()
	defer s.addMu.Unlock()
	pods, _ := s.snapshot()
	p := livePod(pods, name)
	if p == nil {
		return "", fmt.Errorf("delete pod %s of service %s: no such live pod; live: %s", name, s.spec.Name, strings.Join(s.LivePods(), ", "))
	}
	s.remove(p, o, fault)
	np, err := s.create(p.slot, "replaces "+name, fault)
	if err != nil {
		return "", fmt.Errorf("replace pod %s of service %s: %w", name, s.spec.Name, err)
	}
	return np.r.Pod(), nil
}

// WaitGone returns nil once no pod named in names is left on the Service
// (each deleted one's processes reaped), or ctx's error naming those that
// remain.
func (s *Service) WaitGone(ctx context.Context, names ...string) error {
	for {
		pods, ch := s.snapshot()
		var left []string
		for _, p := range pods {
			if slices.Contains(names, p.r.Pod()) {
				left = append(left, p.r.Pod())
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-s.stopped:
			return nil // every process is reaped
		case <-ctx.Done():
			return fmt.Errorf("wait for pods %s of service %s to end: %w", strings.Join(left, ", "), s.spec.Name, ctx.Err())
		}
	}
}

// adopt reconciles a rollout's books with pods deleted by someone else
// meanwhile (a pod-kill): an old pod deleted counts as deleted; a slot
// whose new pod was deleted, or that got a new pod that the rollout did
// not start (a deleted old pod's replacement), takes the slot's live pod
// started since the rollout began as its new pod, so the rollout neither
// waits for a pod that is gone nor starts a second one in the slot.
func adopt(pods []*pod, old, fresh map[int]*pod, deleted map[int]bool) {
	for slot, p := range old {
		if p != nil && !deleted[slot] && p.r.Status().Terminating {
			deleted[slot] = true
		}
	}
	for _, p := range pods {
		if p.r.Status().Terminating || p == old[p.slot] {
			continue
		}
		if f := fresh[p.slot]; f == nil || f.r.Status().Terminating && f != p {
			fresh[p.slot] = p
		}
	}
}

// RolloutOptions say how [Service.Rollout] replaces every pod: the
// strategy of a Deployment's RollingUpdate, in pods.
type RolloutOptions struct {
	// MaxSurge is how many pods may run above the declared count
	// (maxSurge resolved against it, rounded up).
	MaxSurge int
	// MaxUnavailable is how many pods below the declared count may be
	// unavailable (maxUnavailable resolved, rounded down). MaxSurge and
	// MaxUnavailable must not both be 0.
	MaxUnavailable int
	// Delete is how an old pod is ended: the grace period and preStop
	// sleep of the pod's spec, as a rollout deletes pods.
	Delete DeleteOptions
	// Fault names the fault on the events ("" for none).
	Fault string
}

// Rollout restarts every pod of the Service as the Deployment controller
// rolls a new ReplicaSet out (kubectl rollout restart): it starts new pods
// (one per slot, named by [PodName]) while the pods that run, old and new,
// are fewer than declared + MaxSurge; it deletes an old pod only while the
// ready pods, not counting it, stay at least declared - MaxUnavailable, so
// with MaxUnavailable 0 a new pod is ready before an old one is ended. An
// old pod whose slot's new pod is ready goes first, then an unready one.
// Each start and delete is a ScalingReplicaSet event (Labels["step"] up
// or down); the end is a RolloutComplete note. It returns once every slot
// has a ready new pod and every old pod's processes are reaped. Errors:
// both bounds 0, ctx ending first or the Service stopping, each naming
// what was left (the rollout stops where it is; pods already started
// keep running).
func (s *Service) Rollout(ctx context.Context, o RolloutOptions) error {
	if o.MaxSurge < 0 || o.MaxUnavailable < 0 || o.MaxSurge == 0 && o.MaxUnavailable == 0 {
		return fmt.Errorf("roll out service %s: maxSurge %d and maxUnavailable %d: both must be >= 0 and one above 0", s.spec.Name, o.MaxSurge, o.MaxUnavailable)
	}
	n := s.spec.Replicas
	pods, _ := s.snapshot()
	old := map[int]*pod{} // slot -> its pod when the rollout began
	for _, p := range pods {
		if !p.r.Status().Terminating {
			old[p.slot] = p
		}
	}
	fresh := map[int]*pod{}   // slot -> its new pod
	deleted := map[int]bool{} // slot -> its old pod was deleted
	step := 0
	stepEvent := func(dir, pod, detail string) {
		step++
		s.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonScaling, Pod: pod, Fault: o.Fault,
			Labels: map[string]string{"step": dir}, Value: float64(step),
			Detail: fmt.Sprintf("rollout step %d: %s", step, detail)})
	}
	for {
		pods, ch := s.snapshot()
		adopt(pods, old, fresh, deleted)
		live, available := 0, 0
		for _, p := range pods {
			if st := p.r.Status(); !st.Terminating {
				live++
				if st.Ready {
					available++
				}
			}
		}
		done := len(fresh) == n
		for slot := range n {
			if p := fresh[slot]; p == nil || !p.r.Status().Ready {
				done = false
			}
		}
		oldLeft := 0
		for _, p := range pods {
			if q := old[p.slot]; q == p {
				oldLeft++
			}
		}
		if done && oldLeft == 0 {
			s.emit(event.Event{Kind: event.Note, Reason: ReasonRolloutComplete, Fault: o.Fault,
				Detail: fmt.Sprintf("rollout of %d pods complete in %d steps", n, step)})
			return nil
		}
		acted := false
		// Scale up: a new pod for each slot without one, within the surge.
		for slot := range n {
			if fresh[slot] != nil || live >= n+o.MaxSurge {
				continue
			}
			s.addMu.Lock()
			p, err := s.create(slot, "rollout", o.Fault)
			s.addMu.Unlock()
			if err != nil {
				return fmt.Errorf("roll out service %s: %w", s.spec.Name, err)
			}
			fresh[slot] = p
			live++
			acted = true
			stepEvent("up", p.r.Pod(), fmt.Sprintf("scaled up: started pod %s in slot %d (%d of %d new)", p.r.Pod(), slot, len(fresh), n))
		}
		// Scale down: old pods, within the unavailability allowed.
		var cands []int
		for slot, p := range old {
			if !deleted[slot] && p != nil {
				cands = append(cands, slot)
			}
		}
		rank := func(slot int) int {
			switch {
			case fresh[slot] != nil && fresh[slot].r.Status().Ready:
				return 0
			case !old[slot].r.Status().Ready:
				return 1
			}
			return 2
		}
		slices.SortFunc(cands, func(a, b int) int {
			if ra, rb := rank(a), rank(b); ra != rb {
				return ra - rb
			}
			return a - b
		})
		for _, slot := range cands {
			p := old[slot]
			cost := 0
			if p.r.Status().Ready {
				cost = 1
			}
			if available-cost < n-o.MaxUnavailable {
				continue
			}
			deleted[slot] = true
			stepEvent("down", p.r.Pod(), fmt.Sprintf("scaled down: deleting pod %s of slot %d (%d old left running)", p.r.Pod(), slot, len(old)-len(deleted)))
			s.remove(p, o.Delete, o.Fault)
			available -= cost
			live--
			acted = true
		}
		if acted {
			continue
		}
		select {
		case <-ch:
		case <-s.stopped:
			return fmt.Errorf("roll out service %s: %w", s.spec.Name, errors.New("service stopped"))
		case <-ctx.Done():
			return s.notReady(n, available, fmt.Errorf("rollout stopped after %d steps: %w", step, ctx.Err()))
		}
	}
}
