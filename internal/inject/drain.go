package inject

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultDrain, newDrain) }

// KindKubeNode is a node a drain cordoned (Node, in the cluster of
// Kubeconfig and Context): `drill cleanup` uncordons it. A node that was
// cordoned before the drain is journaled with WasCordoned and left so.
const KindKubeNode = "kube-node"

// MirrorPodAnnotation marks a static pod's mirror in the API; kubectl
// drain skips such pods (the kubelet, not the API, owns them).
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// Event reasons of a drain.
const (
	// ReasonCordon: drill set the node's spec.unschedulable (Detail: node).
	ReasonCordon = "NodeNotSchedulable"
	// ReasonUncordon: drill cleared it again.
	ReasonUncordon = "NodeSchedulable"
)

// drain cordons a node and evicts its pods of the run's namespace, as
// `kubectl drain` does; its Revert waits for the evicted pods to be gone
// and uncordons the node.
type drain struct {
	fault    scenario.Fault
	env      *Env
	k        *KubeEnv
	selector string
}

var (
	_ Injector  = (*drain)(nil)
	_ Describer = (*drain)(nil)
)

// newDrain builds the injector of a drain fault; the service must be one
// of a kubernetes run's.
func newDrain(f scenario.Fault, env *Env) (Injector, error) {
	sel, ok := env.kubeSelector(f.Service)
	if !ok {
		return nil, fmt.Errorf("service: %q is not a service of a kubernetes run with a selector: a drain acts on a cluster's node", f.Service)
	}
	return &drain{fault: f, env: env, k: env.Kube, selector: sel}, nil
}

func (d *drain) nodeText() string {
	switch {
	case d.fault.Node != "":
		return "node " + d.fault.Node
	case len(d.fault.Pods) > 0:
		return "the node of pod " + d.fault.Pods[0] + " (by creation time)"
	}
	return "the node of pod " + d.fault.Service + "-0 (by creation time)"
}

// Describe implements [Describer].
func (d *drain) Describe() string {
	return fmt.Sprintf("cordon %s and evict its pods of namespace %s (eviction API; DaemonSet and mirror pods skipped); uncordoned at the end",
		d.nodeText(), d.k.Namespace)
}

// node resolves the node to drain.
func (d *drain) node(ctx context.Context) (string, error) {
	if d.fault.Node != "" {
		return d.fault.Node, nil
	}
	name := d.fault.Service + "-0"
	if len(d.fault.Pods) > 0 {
		name = d.fault.Pods[0]
	}
	live, err := livePods(ctx, d.k, d.selector)
	if err != nil {
		return "", err
	}
	i, err := strconv.Atoi(strings.TrimPrefix(name, d.fault.Service+"-"))
	if err != nil || i < 0 || i >= len(live) {
		return "", fmt.Errorf("pods: no pod %s: service %s has %d live pods now", name, d.fault.Service, len(live))
	}
	if live[i].Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s (%s) is not bound to a node yet", name, live[i].Name)
	}
	return live[i].Spec.NodeName, nil
}

func (d *drain) entry(op, node string, was bool) Entry {
	return Entry{Op: op, Key: KindKubeNode + "/" + d.fault.Name, Kind: KindKubeNode, Fault: d.fault.Name, Service: d.fault.Service,
		Namespace: d.k.Namespace, Kubeconfig: d.k.Kubeconfig, Context: d.k.Context, Node: node, WasCordoned: was}
}

// Drainable reports whether `kubectl drain` would evict pod, and why not:
// a pod being deleted, a finished pod, a DaemonSet's pod or a mirror pod
// is skipped.
func Drainable(pod *corev1.Pod) (ok bool, why string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return false, "already terminating"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false, "finished"
	case pod.Annotations[MirrorPodAnnotation] != "":
		return false, "mirror pod"
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "DaemonSet" {
		return false, "DaemonSet pod"
	}
	return true, ""
}

// Inject implements [Injector]. It resolves the node, journals it (with
// whether it was cordoned already), cordons it, then evicts each of its
// drainable pods of the namespace. A refused eviction (a
// PodDisruptionBudget) is an EvictionRefused event, not an error. On
// another error the Revert comes back with it (it uncordons).
func (d *drain) Inject(ctx context.Context) (Revert, error) {
	name, err := d.node(ctx)
	if err != nil {
		return nil, fmt.Errorf("choose the node to drain: %w", err)
	}
	n, err := d.k.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	was := n.Spec.Unschedulable
	if err := d.env.Journal.Record(d.entry(OpApply, name, was)); err != nil {
		return nil, fmt.Errorf("journal drain: %w", err)
	}
	if !was {
		if err := setUnschedulable(ctx, d.k.Client, name, true); err != nil {
			_ = d.env.Journal.Record(d.entry(OpRevert, name, was))
			return nil, err
		}
	}
	d.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonCordon, Service: d.fault.Service, Fault: d.fault.Name,
		Labels: map[string]string{"node": name}, Detail: "node " + name + " cordoned by fault " + d.fault.Name})
	var evicted []corev1.Pod
	revert := d.revert(name, was, &evicted)
	pods, err := d.k.Client.CoreV1().Pods(d.k.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return revert, fmt.Errorf("list the pods of node %s in namespace %s: %w", name, d.k.Namespace, err)
	}
	var errs []error
	for i := range pods.Items {
		pod := pods.Items[i]
		if pod.Spec.NodeName != name {
			continue // a client that ignores the field selector
		}
		if ok, why := Drainable(&pod); !ok {
			d.env.logger().Info("drain skips pod", "pod", pod.Name, "why", why)
			continue
		}
		uid := pod.UID
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
		err := d.k.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			d.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonEvicted, Pod: pod.Name, Service: d.fault.Service, Fault: d.fault.Name,
				Labels: map[string]string{"node": name}, Detail: "evicted from node " + name + " by fault " + d.fault.Name})
			evicted = append(evicted, pod)
		case apierrors.IsTooManyRequests(err):
			d.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonEvictionRefused, Pod: pod.Name, Service: d.fault.Service, Fault: d.fault.Name,
				Labels: map[string]string{"node": name}, Detail: "the eviction API refused to evict pod " + pod.Name + ": " + err.Error()})
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	if len(errs) > 0 {
		return revert, errors.Join(errs...)
	}
	d.env.logger().Info("fault on", "fault", d.fault.Name, "what", d.Describe(), "node", name, "evicted", podNames(evicted))
	return revert, nil
}

// revert waits (bounded by ctx) for the evicted pods to be gone, then
// uncordons the node whatever came of the wait (with a short context of
// its own when ctx has ended), unless it was cordoned before the drain.
func (d *drain) revert(node string, was bool, evicted *[]corev1.Pod) Revert {
	return func(ctx context.Context) error {
		waitErr := waitPodsGone(ctx, d.k, *evicted)
		if !was {
			uctx := ctx
			if ctx.Err() != nil {
				var cancel context.CancelFunc
				uctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
			}
			if err := setUnschedulable(uctx, d.k.Client, node, false); err != nil && !apierrors.IsNotFound(err) {
				return errors.Join(waitErr, err)
			}
			d.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonUncordon, Service: d.fault.Service, Fault: d.fault.Name,
				Labels: map[string]string{"node": node}, Detail: "node " + node + " uncordoned at the end of fault " + d.fault.Name})
		}
		if err := d.env.Journal.Record(d.entry(OpRevert, node, was)); err != nil {
			return errors.Join(waitErr, fmt.Errorf("journal end of drain: %w", err))
		}
		if waitErr != nil {
			return fmt.Errorf("drain %s (node %s uncordoned): %w", d.fault.Name, node, waitErr)
		}
		d.env.logger().Info("fault off", "fault", d.fault.Name, "what", d.Describe())
		return nil
	}
}

// setUnschedulable sets a node's spec.unschedulable, as `kubectl cordon`
// and `kubectl uncordon` do.
func setUnschedulable(ctx context.Context, cs kubernetes.Interface, node string, v bool) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v))
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		verb := "cordon"
		if !v {
			verb = "uncordon"
		}
		return fmt.Errorf("%s node %s: %w", verb, node, err)
	}
	return nil
}

// undoKubeNode is [Cleanup]'s work for a [KindKubeNode] entry: uncordon
// the node unless it was cordoned before the drain.
func undoKubeNode(ctx context.Context, opts CleanupOptions, e Entry) (detail string, gone bool, err error) {
	if e.WasCordoned {
		return "node " + e.Node + " was cordoned before the drain: left cordoned", true, nil
	}
	cs, err := cleanupKube(opts, e)
	if err != nil {
		return "", false, err
	}
	err = setUnschedulable(ctx, cs, e.Node, false)
	if apierrors.IsNotFound(err) {
		return "node " + e.Node + " no longer exists", true, nil
	}
	if err != nil {
		return "", false, err
	}
	return "uncordoned node " + e.Node, false, nil
}
