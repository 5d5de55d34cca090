package inject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/scenario"
)

// ComposeEnv is the project of a compose run, whose services' containers
// pod-kill and rollout end and start again.
type ComposeEnv struct {
	// Stack is the run's project, brought up; required.
	Stack *compose.Stack
	// Events receives the faults' own events (Killing, pod-deleted,
	// pod-created, ScalingReplicaSet, RolloutComplete); nil discards.
	Events event.Sink
	// Now is the run's clock, the offset the events are stamped with;
	// nil stamps 0.
	Now func() time.Duration
}

// emit stamps e now and sends it, as the watcher's events of the same
// container are sent (source docker, Pod the container's name).
func (c *ComposeEnv) emit(ctr *compose.Container, e event.Event) {
	if c.Events == nil {
		return
	}
	if c.Now != nil {
		e.At = c.Now()
	}
	e.Source = compose.Source
	if ctr != nil {
		e.Service, e.Pod, e.Container = ctr.Service, ctr.Name, ctr.Service
	}
	c.Events.Emit(e)
}

// composeService returns the compose environment and service's
// containers when service is a service of a compose run.
func (e *Env) composeService(service string) (*ComposeEnv, []*compose.Container, bool) {
	if e.Compose == nil || e.Compose.Stack == nil {
		return nil, nil, false
	}
	cs := e.Compose.Stack.ServiceContainers(service)
	return e.Compose, cs, len(cs) > 0
}

// KindComposePods is a pod-kill or rollout fault on a Compose service:
// its containers (Containers, engine ids; Pods their names), those being
// stopped at the moment (Stopping: the entry is written again before
// each stop and after each start) and the service's stop grace period
// (GraceSeconds). The engine's restart policy does not start a container
// drill stopped, so a run killed mid-fault may leave one stopped:
// `drill cleanup` waits (up to the grace period and 10 s more) for any
// container journaled as stopping to stop, then starts every journaled
// container that does not run. (The run's compose entry, older, is undone
// after it and removes the project.)
const KindComposePods = "compose-pods"

// composePodsEntry is the journal entry of fault on service's
// containers cs, with those of stopping being stopped.
func composePodsEntry(op, fault, service string, cs []*compose.Container, stopping []*compose.Container, grace time.Duration, seed *int64) Entry {
	e := Entry{Op: op, Key: KindComposePods + "/" + service + "/" + fault, Kind: KindComposePods,
		Fault: fault, Service: service, Seed: seed, GraceSeconds: int(grace / time.Second)}
	if op != OpApply {
		return e
	}
	for _, c := range cs {
		e.Containers = append(e.Containers, c.ID)
		e.Pods = append(e.Pods, c.Name)
	}
	for _, c := range stopping {
		e.Stopping = append(e.Stopping, c.ID)
	}
	return e
}

// composeStep bounds the stop and new start of one container: its grace
// period and this much more. A stop and start are not cut short by the
// fault's end (a container is never left stopped by a cancelled call).
const composeStep = 60 * time.Second

// stopAndStart ends ctr (SIGTERM with the service's grace, or SIGKILL)
// and starts it again, with the events of a deleted pod and of the pod
// that replaces it: Killing, pod-deleted (how it ended), pod-created
// (reason, "replaces <pod>" or "rollout"). It is bounded by the grace
// period and [composeStep], whatever ctx says.
func stopAndStart(ctx context.Context, ce *ComposeEnv, ctr *compose.Container, kill bool, fault, why, created string) error {
	st := ce.Stack
	grace := st.StopGrace(ctr.Service)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+composeStep)
	defer cancel()
	how := fmt.Sprintf("SIGTERM, SIGKILL after the stop grace period %s", grace)
	if kill {
		how = "SIGKILL"
	}
	ce.emit(ctr, event.Event{Kind: event.K8sEvent, Reason: ReasonKilling, Fault: fault, Detail: how + ": " + why})
	end, err := st.Stop(sctx, ctr, kill)
	if err != nil {
		// The start below is tried all the same: a container that did
		// stop is started again, one that runs is left running.
		err = fmt.Errorf("stop %s: %w", ctr.Name, err)
	} else {
		ce.emit(ctr, event.Event{Kind: event.PodDeleted, Reason: "deleted: " + why, Fault: fault, Detail: end.String()})
	}
	ce.emit(ctr, event.Event{Kind: event.PodCreated, Reason: created, Fault: fault,
		Detail: "the same container started again (the engine's restart policy does not restart a container stopped through its API)"})
	if serr := st.StartAgain(sctx, ctr); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// composePodKill stops some containers of a Compose service and starts
// each again, as a ReplicaSet replaces a deleted pod.
type composePodKill struct {
	fault scenario.Fault
	env   *Env
	ce    *ComposeEnv
	ctrs  []*compose.Container
	seed  *int64
}

var (
	_ Injector  = (*composePodKill)(nil)
	_ Describer = (*composePodKill)(nil)
)

// newComposePodKill builds the pod-kill of a Compose service (one of the
// stack's), drawing a seed for a random choice without one.
func newComposePodKill(f scenario.Fault, env *Env, ce *ComposeEnv, ctrs []*compose.Container) (Injector, error) {
	if f.Evict != nil {
		return nil, fmt.Errorf("evict: applies only to a service of a kubernetes run, not to Compose service %s", f.Service)
	}
	p := &composePodKill{fault: f, env: env, ce: ce, ctrs: ctrs}
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
func (p *composePodKill) Describe() string {
	how := fmt.Sprintf("SIGTERM, SIGKILL after the stop grace period %s", p.ce.Stack.StopGrace(p.fault.Service))
	if p.fault.Signal == scenario.SignalKill {
		how = "SIGKILL"
	}
	which := choiceDescribe(p.fault, p.seed, "container")
	return fmt.Sprintf("stop %s of Compose service %s (%s); drill starts each again once it stopped", which, p.fault.Service, how)
}

// choose returns the containers the fault stops: the named ones
// (<service>-i is container i), or count or percent (rounded up) of them
// chosen with the seed as [ChoosePods] chooses.
func (p *composePodKill) choose() ([]*compose.Container, error) {
	names := make([]string, len(p.ctrs))
	for i := range p.ctrs {
		names[i] = compose.PodName(p.fault.Service, i)
	}
	var chosen []string
	switch f := p.fault; {
	case len(f.Pods) > 0:
		for _, n := range f.Pods {
			if !slices.Contains(names, n) {
				return nil, fmt.Errorf("no container %s of Compose service %s (it has %s)", n, f.Service, strings.Join(names, ", "))
			}
		}
		chosen = f.Pods
	case f.Percent != nil:
		chosen = ChoosePods(names, (len(names)*(*f.Percent)+99)/100, *p.seed)
	default:
		chosen = ChoosePods(names, *f.Count, *p.seed)
	}
	var out []*compose.Container
	for i, n := range names {
		if slices.Contains(chosen, n) {
			out = append(out, p.ctrs[i])
		}
	}
	return out, nil
}

// Inject implements [Injector]. It chooses the containers, journals them
// (as stopping), and stops each and starts it again in the background;
// the Revert waits for that.
func (p *composePodKill) Inject(ctx context.Context) (Revert, error) {
	chosen, err := p.choose()
	if err != nil {
		return nil, err
	}
	if len(chosen) == 0 {
		return nil, fmt.Errorf("choose containers of Compose service %s: none", p.fault.Service)
	}
	grace := p.ce.Stack.StopGrace(p.fault.Service)
	if err := p.env.Journal.Record(composePodsEntry(OpApply, p.fault.Name, p.fault.Service, p.ctrs, chosen, grace, p.seed)); err != nil {
		return nil, fmt.Errorf("journal pod-kill: %w", err)
	}
	why := "fault " + p.fault.Name + " (pod-kill"
	if p.seed != nil {
		why += fmt.Sprintf(", seed %d", *p.seed)
	}
	why += ")"
	kill := p.fault.Signal == scenario.SignalKill
	done := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		errs := make([]error, len(chosen))
		for i, c := range chosen {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = stopAndStart(ctx, p.ce, c, kill, p.fault.Name, why, "replaces "+c.Name)
			}()
		}
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	names := make([]string, len(chosen))
	for i, c := range chosen {
		names[i] = c.Name
	}
	p.env.logger().Info("fault on", "fault", p.fault.Name, "what", p.Describe(), "containers", names)
	var result error
	finished := false
	return func(ctx context.Context) error {
		if !finished {
			select {
			case result = <-done:
				finished = true
			case <-ctx.Done():
				// The stops and starts are bounded on their own: a retry
				// waits again.
				return fmt.Errorf("pod-kill %s: containers %s not started again yet: %w", p.fault.Name, strings.Join(names, ", "), ctx.Err())
			}
		}
		if result != nil {
			return fmt.Errorf("pod-kill %s: %w", p.fault.Name, result)
		}
		if err := p.env.Journal.Record(composePodsEntry(OpRevert, p.fault.Name, p.fault.Service, nil, nil, 0, nil)); err != nil {
			return fmt.Errorf("journal end of pod-kill: %w", err)
		}
		p.env.logger().Info("fault off", "fault", p.fault.Name, "what", p.Describe())
		return nil
	}, nil
}

// composeRollout restarts a Compose service's containers one after
// another: each is stopped (with its grace period), started again, and
// serving (healthy, or running without a healthcheck) before the next.
type composeRollout struct {
	fault scenario.Fault
	env   *Env
	ce    *ComposeEnv
	ctrs  []*compose.Container
}

var (
	_ Injector  = (*composeRollout)(nil)
	_ Describer = (*composeRollout)(nil)
)

// Describe implements [Describer].
func (r *composeRollout) Describe() string {
	return fmt.Sprintf("rolling restart of Compose service %s's %d container(s), one after another "+
		"(SIGTERM, SIGKILL after the stop grace period %s; started again and serving before the next)",
		r.fault.Service, len(r.ctrs), r.ce.Stack.StopGrace(r.fault.Service))
}

// Inject implements [Injector]. It journals the service's containers,
// then rolls them in the background and returns at once. The Revert
// waits for the rollout to complete; when its ctx ends first, the
// rollout stops after the container it is at runs again (never leaving
// one stopped), and the error says so once.
func (r *composeRollout) Inject(ctx context.Context) (Revert, error) {
	st := r.ce.Stack
	grace := st.StopGrace(r.fault.Service)
	if err := r.env.Journal.Record(composePodsEntry(OpApply, r.fault.Name, r.fault.Service, r.ctrs, nil, grace, nil)); err != nil {
		return nil, fmt.Errorf("journal rollout: %w", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- r.roll(rctx, grace) }()
	r.env.logger().Info("fault on", "fault", r.fault.Name, "what", r.Describe())
	var result error
	finished, reported := false, false
	return func(ctx context.Context) error {
		if reported {
			return nil
		}
		if !finished {
			select {
			case result = <-done:
			case <-ctx.Done():
				stop()
				result = fmt.Errorf("rollout of Compose service %s did not complete by the fault's end (give the fault a longer for): %w", r.fault.Service, <-done)
			}
			finished = true
			stop()
		}
		if err := r.env.Journal.Record(composePodsEntry(OpRevert, r.fault.Name, r.fault.Service, nil, nil, 0, nil)); err != nil {
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

// roll is the rollout: for each container, a step down (stop) and a step
// up (start), ScalingReplicaSet events as the local runtime's, then a
// wait until it serves; a RolloutComplete note at the end. ctx ending
// stops it between containers or while it waits for one to serve (the
// container runs then); a stop and start in progress finish first.
func (r *composeRollout) roll(ctx context.Context, grace time.Duration) error {
	st := r.ce.Stack
	why := "fault " + r.fault.Name + " (rollout)"
	step := 0
	stepEvent := func(c *compose.Container, dir, detail string) {
		step++
		r.ce.emit(c, event.Event{Kind: event.K8sEvent, Reason: localenv.ReasonScaling, Fault: r.fault.Name,
			Labels: map[string]string{"step": dir}, Value: float64(step),
			Detail: fmt.Sprintf("rollout step %d: %s", step, detail)})
	}
	for i, c := range r.ctrs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before container %s (%d of %d done): %w", c.Name, i, len(r.ctrs), err)
		}
		if err := r.env.Journal.Record(composePodsEntry(OpApply, r.fault.Name, r.fault.Service, r.ctrs, []*compose.Container{c}, grace, nil)); err != nil {
			return fmt.Errorf("journal rollout: %w", err)
		}
		stepEvent(c, "down", "stop container "+c.Name)
		if err := stopAndStart(ctx, r.ce, c, false, r.fault.Name, why, "rollout"); err != nil {
			return err
		}
		stepEvent(c, "up", "container "+c.Name+" started again")
		if err := r.env.Journal.Record(composePodsEntry(OpApply, r.fault.Name, r.fault.Service, r.ctrs, nil, grace, nil)); err != nil {
			return fmt.Errorf("journal rollout: %w", err)
		}
		if err := st.WaitServing(ctx, c); err != nil {
			return fmt.Errorf("wait for container %s (%d of %d) to serve: %w", c.Name, i+1, len(r.ctrs), err)
		}
	}
	r.ce.emit(nil, event.Event{Kind: event.Note, Reason: localenv.ReasonRolloutComplete, Fault: r.fault.Name, Service: r.fault.Service,
		Detail: fmt.Sprintf("rollout of %d container(s) complete in %d steps", len(r.ctrs), step)})
	return nil
}

// undoComposePods is [Cleanup]'s work for a [KindComposePods] entry: a
// container journaled as being stopped is waited for (the engine goes on
// stopping it after drill died) up to its grace period and 10 s more;
// then every journaled container that still exists and does not run is
// started again.
func undoComposePods(ctx context.Context, e Entry) (detail string, gone bool, err error) {
	cli, err := docker.Client(ctx)
	if err != nil {
		return "", false, fmt.Errorf("start the containers of Compose service %s again: %w", e.Service, err)
	}
	defer cli.Close()
	var started, left []string
	var errs []error
	for i, id := range e.Containers {
		name := id
		if i < len(e.Pods) {
			name = e.Pods[i]
		}
		running := func() (bool, bool, error) {
			in, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) {
				return false, false, nil
			}
			if err != nil {
				return false, true, err
			}
			s := in.Container.State
			return s != nil && (s.Running || s.Restarting), true, nil
		}
		on, exists, err := running()
		if err != nil {
			errs = append(errs, fmt.Errorf("inspect container %s: %w", name, err))
			continue
		}
		if on && slices.Contains(e.Stopping, id) {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(e.GraceSeconds)*time.Second+10*time.Second)
			for on && err == nil && wctx.Err() == nil {
				select {
				case <-wctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				on, exists, err = running()
			}
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("inspect container %s: %w", name, err))
				continue
			}
		}
		if !exists || on {
			continue
		}
		if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("start container %s again: %w", name, err))
			left = append(left, name)
			continue
		}
		started = append(started, name)
	}
	if len(errs) > 0 {
		return "still stopped: " + strings.Join(left, ", "), false, errors.Join(errs...)
	}
	if len(started) == 0 {
		return fmt.Sprintf("no container of Compose service %s left stopped by fault %s", e.Service, e.Fault), true, nil
	}
	return "started again " + strings.Join(started, ", "), false, nil
}
