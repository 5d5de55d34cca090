package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` sets to the time of the restart (RFC 3339); changing it is what
// makes the Deployment controller roll every pod.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// kubeRollout restarts a Deployment as `kubectl rollout restart` does and
// watches the rollout to completion; its Revert waits for it and puts
// back the strategy drill changed.
type kubeRollout struct {
	fault scenario.Fault
	env   *Env
	k     *KubeEnv
}

var (
	_ Injector  = (*kubeRollout)(nil)
	_ Describer = (*kubeRollout)(nil)
)

// Describe implements [Describer].
func (r *kubeRollout) Describe() string {
	s := fmt.Sprintf("rolling restart of Deployment %s/%s (the patch of `kubectl rollout restart`)", r.k.Namespace, r.fault.Service)
	if r.fault.MaxSurge == nil && r.fault.MaxUnavailable == nil {
		return s + " with the Deployment's own strategy"
	}
	s += " with its strategy's"
	if r.fault.MaxSurge != nil {
		s += " maxSurge set to " + r.fault.MaxSurge.String()
	}
	if r.fault.MaxUnavailable != nil {
		if r.fault.MaxSurge != nil {
			s += " and"
		}
		s += " maxUnavailable set to " + r.fault.MaxUnavailable.String()
	}
	return s + " for the rollout (put back at its end)"
}

// intOrString is v as the Deployment's strategy writes it (3 or "25%").
func intOrString(v scenario.IntOrPercent) intstr.IntOrString {
	if v.Percent {
		return intstr.FromString(strconv.Itoa(v.N) + "%")
	}
	return intstr.FromInt32(int32(v.N))
}

// RolloutStatus reads a Deployment's rollout as `kubectl rollout status`
// does: done when the controller has observed the current generation and
// every declared replica is updated, no old replica is left and every
// updated one is available. msg says what it waits for; err is set when
// the Progressing condition says ProgressDeadlineExceeded.
func RolloutStatus(d *appsv1.Deployment) (done bool, msg string, err error) {
	if d.Generation > d.Status.ObservedGeneration {
		return false, "waiting for the Deployment's spec update to be observed", nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, "", fmt.Errorf("deployment %q exceeded its progress deadline", d.Name)
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d out of %d new replicas have been updated", st.UpdatedReplicas, want), nil
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas are pending termination", st.Replicas-st.UpdatedReplicas), nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas are available", st.AvailableReplicas, st.UpdatedReplicas), nil
	}
	return true, fmt.Sprintf("deployment %q successfully rolled out", d.Name), nil
}

func (r *kubeRollout) entry(op, strategy string) Entry {
	return Entry{Op: op, Key: KindKubeDeployment + "/" + r.fault.Service + "/" + r.fault.Name, Kind: KindKubeDeployment,
		Fault: r.fault.Name, Service: r.fault.Service, Namespace: r.k.Namespace, Deployment: r.fault.Service,
		Kubeconfig: r.k.Kubeconfig, Context: r.k.Context, Strategy: strategy}
}

// Inject implements [Injector]. It reads the Deployment (a paused one is
// refused: its rollout would never progress), journals it with its
// strategy when the fault sets maxSurge or maxUnavailable, then makes one
// strategic merge patch: the restartedAt annotation of `kubectl rollout
// restart` and the strategy's bounds the fault sets. The rollout is
// watched in the background from then on, with a RolloutStep event each
// time its status moves.
func (r *kubeRollout) Inject(ctx context.Context) (Revert, error) {
	deps := r.k.Client.AppsV1().Deployments(r.k.Namespace)
	d, err := deps.Get(ctx, r.fault.Service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Deployment %s/%s (the Deployment named like service %s): %w", r.k.Namespace, r.fault.Service, r.fault.Service, err)
	}
	if d.Spec.Paused {
		return nil, fmt.Errorf("deployment %s/%s is paused: a restart would never roll out (`kubectl rollout resume` it first)", r.k.Namespace, d.Name)
	}
	setBounds := r.fault.MaxSurge != nil || r.fault.MaxUnavailable != nil
	var before string
	if setBounds {
		b, err := json.Marshal(d.Spec.Strategy)
		if err != nil {
			return nil, fmt.Errorf("encode the strategy of Deployment %s: %w", d.Name, err)
		}
		before = string(b)
	}
	if err := r.env.Journal.Record(r.entry(OpApply, before)); err != nil {
		return nil, fmt.Errorf("journal rollout: %w", err)
	}
	spec := map[string]any{
		"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			RestartedAtAnnotation: time.Now().Format(time.RFC3339),
		}}},
	}
	if setBounds {
		ru := map[string]any{}
		if r.fault.MaxSurge != nil {
			ru["maxSurge"] = intOrString(*r.fault.MaxSurge)
		}
		if r.fault.MaxUnavailable != nil {
			ru["maxUnavailable"] = intOrString(*r.fault.MaxUnavailable)
		}
		spec["strategy"] = map[string]any{"type": string(appsv1.RollingUpdateDeploymentStrategyType), "rollingUpdate": ru}
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, fmt.Errorf("encode the restart patch: %w", err)
	}
	if _, err := deps.Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		// Nothing was changed: close the entry.
		_ = r.env.Journal.Record(r.entry(OpRevert, ""))
		return nil, fmt.Errorf("patch Deployment %s/%s: %w", r.k.Namespace, d.Name, err)
	}
	r.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonRolloutStep, Service: r.fault.Service, Fault: r.fault.Name,
		Labels: map[string]string{"step": "restart"}, Detail: "patched " + RestartedAtAnnotation + " of Deployment " + d.Name})
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- r.watch(wctx, d.Name) }()
	r.env.logger().Info("fault on", "fault", r.fault.Name, "what", r.Describe())

	var result error
	finished, restored := false, !setBounds
	return func(ctx context.Context) error {
		if !finished {
			select {
			case result = <-done:
			case <-ctx.Done():
				stop()
				result = fmt.Errorf("rollout of Deployment %s did not complete by the fault's end (give the fault a longer for; the controller goes on with it): %w", d.Name, <-done)
			}
			finished = true
			stop()
		}
		if !restored {
			if err := restoreStrategy(ctx, r.k, d.Name, before); err != nil {
				return errors.Join(result, err)
			}
			restored = true
		}
		if err := r.env.Journal.Record(r.entry(OpRevert, "")); err != nil {
			return errors.Join(result, fmt.Errorf("journal end of rollout: %w", err))
		}
		if result != nil {
			err := result
			result = nil // said once; a retry finds nothing to undo
			return err
		}
		r.env.logger().Info("fault off", "fault", r.fault.Name, "what", r.Describe())
		return nil
	}, nil
}

// watch polls the Deployment until [RolloutStatus] says done, emitting a
// RolloutStep event each time the status it reads moves.
func (r *kubeRollout) watch(ctx context.Context, name string) error {
	var last string
	for {
		d, err := r.k.Client.AppsV1().Deployments(r.k.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			done, msg, err := RolloutStatus(d)
			if err != nil {
				return err
			}
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			st := d.Status
			key := fmt.Sprintf("%d/%d/%d/%d/%d", st.ObservedGeneration, st.UpdatedReplicas, st.Replicas, st.AvailableReplicas, want)
			if key != last {
				last = key
				r.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonRolloutStep, Service: r.fault.Service, Fault: r.fault.Name,
					Labels: map[string]string{
						"step": "status", "observedGeneration": strconv.FormatInt(st.ObservedGeneration, 10),
						"updated": strconv.Itoa(int(st.UpdatedReplicas)), "replicas": strconv.Itoa(int(st.Replicas)),
						"available": strconv.Itoa(int(st.AvailableReplicas)), "wanted": strconv.Itoa(int(want)),
					}, Detail: msg})
			}
			if done {
				r.k.emit(event.Event{Kind: event.Note, Reason: ReasonRolloutDone, Service: r.fault.Service, Fault: r.fault.Name, Detail: msg})
				return nil
			}
		} else if !apierrors.IsNotFound(err) {
			r.env.logger().Debug("read Deployment", "deployment", name, "err", err)
		} else {
			return fmt.Errorf("deployment %s/%s was deleted during the rollout", r.k.Namespace, name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.k.poll()):
		}
	}
}

// restoreStrategy puts back a Deployment's spec.strategy as journaled
// (JSON of [appsv1.DeploymentStrategy]); "" does nothing. A gone
// Deployment has nothing to restore.
func restoreStrategy(ctx context.Context, k *KubeEnv, name, before string) error {
	if before == "" {
		return nil
	}
	var st appsv1.DeploymentStrategy
	if err := json.Unmarshal([]byte(before), &st); err != nil {
		return fmt.Errorf("read the journaled strategy of Deployment %s: %w", name, err)
	}
	// A JSON merge patch replaces the whole strategy; rollingUpdate null
	// when it had none (a Recreate Deployment).
	var ru any
	if st.RollingUpdate != nil {
		ru = st.RollingUpdate
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"strategy": map[string]any{"type": st.Type, "rollingUpdate": ru}}})
	if err != nil {
		return fmt.Errorf("encode the strategy of Deployment %s: %w", name, err)
	}
	_, err = k.Client.AppsV1().Deployments(k.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("put back the strategy of Deployment %s/%s: %w", k.Namespace, name, err)
	}
	return nil
}
