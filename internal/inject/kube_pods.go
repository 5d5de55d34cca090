package inject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// KubeEnv is the cluster side of a kubernetes run, for the platform
// faults (pod-kill, rollout) on a service's pods and Deployment.
type KubeEnv struct {
	// Client reaches the API server; required.
	Client kubernetes.Interface
	// Namespace is the run's namespace, already allowed by the scenario's
	// environment.kubernetes; required.
	Namespace string
	// Selectors maps a service's name to its label selector (services[].selector).
	Selectors map[string]string
	// Kubeconfig and Context are journaled so that `drill cleanup` reaches
	// the same cluster (Kubeconfig "" is kubectl's default loading).
	Kubeconfig, Context string
	// Events receives the faults' own events (Killing, Evicted,
	// EvictionRefused, RolloutStep, RolloutComplete); nil discards.
	Events event.Sink
	// Now is the run's clock, the offset the events are stamped with;
	// nil stamps 0.
	Now func() time.Duration
	// Poll is how often a fault reads the API while it waits (pods gone,
	// rollout status); 0 means 250 ms.
	Poll time.Duration
}

// Event reasons of the kubernetes platform faults.
const (
	// ReasonKilling: drill deleted the pod (Detail: grace period).
	ReasonKilling = "Killing"
	// ReasonEvicted: the eviction API accepted drill's eviction of the pod.
	ReasonEvicted = "Evicted"
	// ReasonEvictionRefused: the eviction API refused it (a
	// PodDisruptionBudget would be violated, HTTP 429); the pod stays.
	// internal/findings turns these into a finding.
	ReasonEvictionRefused = event.ReasonEvictionRefused
	// ReasonRolloutStep: the Deployment's rollout status moved (Labels:
	// observedGeneration, updated, replicas, available, wanted).
	ReasonRolloutStep = "RolloutStep"
	// ReasonRolloutDone: the rollout completed as `kubectl rollout
	// status` reads it.
	ReasonRolloutDone = "RolloutComplete"
)

func (k *KubeEnv) emit(e event.Event) {
	if k.Events == nil {
		return
	}
	if k.Now != nil {
		e.At = k.Now()
	}
	e.Source = "run"
	k.Events.Emit(e)
}

func (k *KubeEnv) poll() time.Duration {
	if k.Poll > 0 {
		return k.Poll
	}
	return 250 * time.Millisecond
}

// KindKubePods is a pod-kill on a kubernetes service: the pods deleted or
// evicted (Pods, with UIDs in PodUIDs) in Namespace. Nothing to undo: the
// ReplicaSet replaces them; cleanup says so.
const KindKubePods = "kube-pods"

// KindKubeDeployment is a rollout on a Deployment: a restart cannot be
// undone (the controller finishes it), but the strategy drill wrote
// (Strategy, the Deployment's before, as JSON) is put back.
const KindKubeDeployment = "kube-deployment"

// livePods lists the pods of selector in ns that are not being deleted
// nor finished, by creation time then name.
func livePods(ctx context.Context, k *KubeEnv, selector string) ([]corev1.Pod, error) {
	l, err := k.Client.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list pods %s in namespace %s: %w", selector, k.Namespace, err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// kubePodKill deletes (or evicts) some pods of a kubernetes service; its
// Revert waits until they are gone from the API.
type kubePodKill struct {
	fault    scenario.Fault
	env      *Env
	k        *KubeEnv
	selector string
	seed     *int64
}

var (
	_ Injector  = (*kubePodKill)(nil)
	_ Describer = (*kubePodKill)(nil)
)

func newKubePodKill(f scenario.Fault, env *Env, selector string) *kubePodKill {
	p := &kubePodKill{fault: f, env: env, k: env.Kube, selector: selector}
	if len(f.Pods) == 0 {
		seed := rand.Int64()
		if f.Seed != nil {
			seed = *f.Seed
		}
		p.seed = &seed
	}
	return p
}

func (p *kubePodKill) evict() bool { return p.fault.Evict != nil && *p.fault.Evict }

// Describe implements [Describer].
func (p *kubePodKill) Describe() string {
	how := "delete"
	if p.evict() {
		how = "evict (eviction API, PodDisruptionBudgets honoured)"
	}
	grace := "with each pod's grace period"
	if p.fault.Signal == scenario.SignalKill {
		grace = "with grace period 0 (SIGKILL)"
	}
	var which string
	switch f := p.fault; {
	case len(f.Pods) > 0:
		which = "pods " + podsDescribe(f.Pods) + " (the i-th pod of the selector by creation time)"
	case f.Percent != nil:
		which = fmt.Sprintf("%d%% of the Deployment's replicas, at random (seed %d)", *f.Percent, *p.seed)
	default:
		which = fmt.Sprintf("%d pod(s), at random (seed %d)", *f.Count, *p.seed)
	}
	return fmt.Sprintf("%s %s of service %s (%s, namespace %s) %s; the ReplicaSet replaces them",
		how, which, p.fault.Service, p.selector, p.k.Namespace, grace)
}

// choose returns the pods the fault ends among the live ones now.
func (p *kubePodKill) choose(ctx context.Context) ([]corev1.Pod, error) {
	live, err := livePods(ctx, p.k, p.selector)
	if err != nil {
		return nil, err
	}
	if len(live) == 0 {
		return nil, fmt.Errorf("no live pod of selector %s in namespace %s", p.selector, p.k.Namespace)
	}
	names := make([]string, len(live))
	byName := map[string]corev1.Pod{}
	for i, pod := range live {
		names[i] = pod.Name
		byName[pod.Name] = pod
	}
	f := p.fault
	var chosen []string
	switch {
	case len(f.Pods) > 0:
		for _, n := range f.Pods {
			i, err := strconv.Atoi(strings.TrimPrefix(n, f.Service+"-"))
			if err != nil || i < 0 || i >= len(live) {
				return nil, fmt.Errorf("pods: no pod %s: service %s has %d live pods now (%s-0 to %s-%d by creation time: %s)",
					n, f.Service, len(live), f.Service, f.Service, len(live)-1, strings.Join(names, ", "))
			}
			chosen = append(chosen, names[i])
		}
	case f.Percent != nil:
		n := len(live)
		d, err := p.k.Client.AppsV1().Deployments(p.k.Namespace).Get(ctx, f.Service, metav1.GetOptions{})
		if err == nil && d.Spec.Replicas != nil {
			n = int(*d.Spec.Replicas)
		}
		chosen = ChoosePods(names, (n*(*f.Percent)+99)/100, *p.seed)
	default:
		chosen = ChoosePods(names, *f.Count, *p.seed)
	}
	out := make([]corev1.Pod, len(chosen))
	for i, n := range chosen {
		out[i] = byName[n]
	}
	return out, nil
}

// kubePodsEntry is the journal entry of a pod-kill on pods.
func (p *kubePodKill) entry(op string, pods []corev1.Pod) Entry {
	e := Entry{Op: op, Key: KindKubePods + "/" + p.fault.Service + "/" + p.fault.Name, Kind: KindKubePods,
		Fault: p.fault.Name, Service: p.fault.Service, Namespace: p.k.Namespace,
		Kubeconfig: p.k.Kubeconfig, Context: p.k.Context, Seed: p.seed}
	for _, pod := range pods {
		e.Pods = append(e.Pods, pod.Name)
		e.PodUIDs = append(e.PodUIDs, string(pod.UID))
	}
	return e
}

// Inject implements [Injector]. It chooses the pods, journals them, then
// deletes or evicts each with its UID as precondition. A refused eviction
// (a PodDisruptionBudget) is an EvictionRefused event, not an error: the
// pod stays and the run goes on. Other API errors are returned joined,
// with the Revert (what was deleted stays deleted).
func (p *kubePodKill) Inject(ctx context.Context) (Revert, error) {
	pods, err := p.choose(ctx)
	if err != nil {
		return nil, fmt.Errorf("choose pods of service %s: %w", p.fault.Service, err)
	}
	if err := p.env.Journal.Record(p.entry(OpApply, pods)); err != nil {
		return nil, fmt.Errorf("journal pod-kill: %w", err)
	}
	var grace *int64
	if p.fault.Signal == scenario.SignalKill {
		zero := int64(0)
		grace = &zero
	}
	graceText := "the pod's terminationGracePeriodSeconds"
	if grace != nil {
		graceText = "gracePeriodSeconds 0 (SIGKILL)"
	}
	var errs []error
	var ended []corev1.Pod
	for _, pod := range pods {
		uid := pod.UID
		opts := metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &uid}}
		if p.evict() {
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, DeleteOptions: &opts}
			err := p.k.Client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
			switch {
			case err == nil:
				p.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonEvicted, Pod: pod.Name, Service: p.fault.Service, Fault: p.fault.Name,
					Detail: "evicted by fault " + p.fault.Name + " with " + graceText})
				ended = append(ended, pod)
			case apierrors.IsTooManyRequests(err):
				p.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonEvictionRefused, Pod: pod.Name, Service: p.fault.Service, Fault: p.fault.Name,
					Detail: "the eviction API refused to evict pod " + pod.Name + ": " + err.Error()})
				p.env.logger().Warn("eviction refused", "fault", p.fault.Name, "pod", pod.Name, "err", err)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or replaced by one of the same name.
			default:
				errs = append(errs, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		err := p.k.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
		switch {
		case err == nil:
			p.k.emit(event.Event{Kind: event.K8sEvent, Reason: ReasonKilling, Pod: pod.Name, Service: p.fault.Service, Fault: p.fault.Name,
				Detail: "deleted by fault " + p.fault.Name + " with " + graceText})
			ended = append(ended, pod)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	revert := p.wait(ended)
	if len(errs) > 0 {
		return revert, errors.Join(errs...)
	}
	p.env.logger().Info("fault on", "fault", p.fault.Name, "what", p.Describe(), "pods", podNames(ended))
	return revert, nil
}

// wait is the Revert: it waits (bounded by ctx) until every ended pod is
// gone from the API (not found, or a new pod of the same name), then
// closes the journal entry.
func (p *kubePodKill) wait(pods []corev1.Pod) Revert {
	return func(ctx context.Context) error {
		if err := waitPodsGone(ctx, p.k, pods); err != nil {
			return fmt.Errorf("pod-kill %s: %w", p.fault.Name, err)
		}
		if err := p.env.Journal.Record(p.entry(OpRevert, nil)); err != nil {
			return fmt.Errorf("journal end of pod-kill: %w", err)
		}
		p.env.logger().Info("fault off", "fault", p.fault.Name, "what", p.Describe())
		return nil
	}
}

// waitPodsGone polls until none of pods (by name and UID) is in the API.
func waitPodsGone(ctx context.Context, k *KubeEnv, pods []corev1.Pod) error {
	left := slices.Clone(pods)
	for {
		var still []corev1.Pod
		for _, pod := range left {
			got, err := k.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil && ctx.Err() == nil:
				still = append(still, pod) // read again
			case err != nil:
				return fmt.Errorf("wait for pods %s to be gone: %w", strings.Join(podNames(left), ", "), ctx.Err())
			case got.UID == pod.UID:
				still = append(still, pod)
			}
		}
		if len(still) == 0 {
			return nil
		}
		left = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods %s still in the API: %w", strings.Join(podNames(left), ", "), ctx.Err())
		case <-time.After(k.poll()):
		}
	}
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
