package scenario

import (
	"fmt"
	"strconv"
	"strings"
)

// The fault kinds of the platform: they end a service's pods as the
// platform would (a deleted pod, a rolling restart), and the runtime
// replaces them. Local, kubernetes and (pod-kill, rollout) compose
// environments; in kubernetes mode the service's pods are those of its
// selector and its Deployment is the one of the same name in the run's
// namespace; in compose mode a service's pod is its one container, which
// drill stops and starts again.
const (
	// FaultPodKill ends some pods of a service; the runtime replaces them.
	FaultPodKill FaultType = "pod-kill"
	// FaultRollout restarts every pod of a service as a Deployment's
	// rolling update does.
	FaultRollout FaultType = "rollout"
	// FaultDrain cordons a node and evicts its pods of the run's
	// namespace, as `kubectl drain` does (kubernetes only).
	FaultDrain FaultType = "drain"
)

// Signals a pod-kill ends its pods with, sorted.
var PodKillSignals = []string{SignalKill, SignalTerm}

// Values of [Fault.Signal].
const (
	// SignalTerm: the pod is deleted with its grace period, as the kubelet
	// ends it (its terminationGracePeriodSeconds: SIGTERM, SIGKILL once
	// the grace is over).
	SignalTerm = "SIGTERM"
	// SignalKill: the pod's processes get SIGKILL at once.
	SignalKill = "SIGKILL"
)

// DefaultRolloutBound is the default maxSurge and maxUnavailable of a
// rollout, the Deployment's: 25%.
var DefaultRolloutBound = IntOrPercent{N: 25, Percent: true}

var podKillSpec = FaultSpec{
	Type:   FaultPodKill,
	Target: TargetService,
	Attrs: []FaultAttr{
		{Key: "count"}, {Key: "percent"}, {Key: "pods"}, {Key: "seed"}, {Key: "signal"}, {Key: "evict"},
	},
	Doc: "Ends pods of a local service at `at`, as deleting them from their ReplicaSet does: " +
		"each pod's endpoint leaves the Service at once as a terminating one (ready=false, " +
		"serving while its readiness holds, terminating=true), so it gets no new request while " +
		"requests in flight on it finish or fail by its own doing; its process gets SIGTERM and " +
		"SIGKILL after the service's terminationGracePeriodSeconds (signal: SIGTERM, the default), " +
		"or SIGKILL at once (signal: SIGKILL). A new pod starts in each one's slot at once (same " +
		"$REPLICA_INDEX, a port of its own, named <pod>-r<n>) and takes traffic when its startup " +
		"and readiness probes pass. Which pods: `count` (default 1) or `percent` of the declared " +
		"replicas (rounded up), chosen at random with `seed` (drawn when the run starts unless " +
		"given, and recorded with the fault's events), or the pods named in `pods`. A kill is not " +
		"undone: the fault's end waits (bounded) for the ended pods' processes to be reaped. " +
		"In a kubernetes environment the pods are those of the service's `selector` in the run's " +
		"namespace, not being deleted, ordered by creation time then name: <service>-i names the " +
		"i-th of them when the fault starts. Each is deleted through the API with its own " +
		"terminationGracePeriodSeconds (signal: SIGTERM) or gracePeriodSeconds 0 (SIGKILL), or, " +
		"with `evict: true` (kubernetes only), evicted through the eviction API, which honours " +
		"PodDisruptionBudgets: a refused eviction is a fault-error event and a finding, not an " +
		"abort. The ReplicaSet replaces the pods; the fault's end waits (bounded) until the deleted " +
		"pods are gone from the API. " +
		"In a compose environment the pod is the Compose service's one container (named <service>-0 in " +
		"`pods`): drill stops it as `docker stop` does (SIGTERM, SIGKILL after the service's " +
		"stop_grace_period, default 10 s) or kills it (signal: SIGKILL), then starts the same container " +
		"again once it stopped (the engine's restart policy does not restart a container stopped through " +
		"its API); the fault's end waits (bounded) until it was started again.",
	Example: `- name: kill-one-gateway
  type: pod-kill
  service: order-gateway
  count: 1
  seed: 7
  at: 20s
  for: 30s`,
	Defaults: func(f *Fault) {
		setIf(&f.Signal, SignalTerm)
		if f.Count == nil && f.Percent == nil && len(f.Pods) == 0 {
			one := 1
			f.Count = &one
		}
	},
	Check: func(f *Fault, report func(key, msg string)) {
		set := 0
		for _, b := range []bool{f.Count != nil, f.Percent != nil, len(f.Pods) > 0} {
			if b {
				set++
			}
		}
		if set > 1 {
			report("", "a pod-kill fault chooses its pods by one of count, percent or pods")
		}
		if len(f.Pods) > 0 && f.Seed != nil {
			report("seed", "seed applies to a random choice (count or percent), not to named pods")
		}
		seen := map[string]bool{}
		for _, p := range f.Pods {
			if seen[p] {
				report("pods", fmt.Sprintf("pod %q is named twice", p))
			}
			seen[p] = true
		}
	},
	CheckTarget: func(s *Scenario, f *Fault, report func(key, msg string)) {
		svc := serviceNamed(s, f.Service)
		if svc == nil {
			return
		}
		if s.Environment.Type == EnvCompose {
			return // the Compose file's containers: composePlatformFault
		}
		if s.Environment.Type == EnvKubernetes {
			// The replicas are the Deployment's, known when the fault
			// starts: only the form of a pod's name is checked here.
			for _, p := range f.Pods {
				i, err := strconv.Atoi(strings.TrimPrefix(p, svc.Name+"-"))
				if !strings.HasPrefix(p, svc.Name+"-") || err != nil || i < 0 || strconv.Itoa(i) != strings.TrimPrefix(p, svc.Name+"-") {
					report("pods", fmt.Sprintf("no pod %q: in a kubernetes environment pods are named %s-<i>, the i-th pod of the selector by creation time (from 0)", p, svc.Name))
				}
			}
			return
		}
		n := max(svc.Replicas, 1)
		if f.Count != nil && *f.Count > n {
			report("count", fmt.Sprintf("count %d is above the %d replicas of service %s", *f.Count, n, svc.Name))
		}
		for _, p := range f.Pods {
			i, err := strconv.Atoi(strings.TrimPrefix(p, svc.Name+"-"))
			if !strings.HasPrefix(p, svc.Name+"-") || err != nil || i < 0 || i >= n || strconv.Itoa(i) != strings.TrimPrefix(p, svc.Name+"-") {
				report("pods", fmt.Sprintf("no pod %q: service %s has pods %s-0 to %s-%d", p, svc.Name, svc.Name, svc.Name, n-1))
			}
		}
	},
}

var rolloutSpec = FaultSpec{
	Type:   FaultRollout,
	Target: TargetService,
	Attrs:  []FaultAttr{{Key: "maxSurge"}, {Key: "maxUnavailable"}},
	Doc: "Restarts every pod of a local service at `at`, as `kubectl rollout restart` makes a " +
		"Deployment's controller do: new pods start (one per slot, named <pod>-r<n>) while old and " +
		"new together are at most the declared replicas plus `maxSurge` (a count, or a percentage " +
		"rounded up; default 25%), and an old pod is deleted only while the ready pods without it " +
		"stay at least the declared replicas minus `maxUnavailable` (rounded down; default 25%), so " +
		"for 1 to 3 replicas a new pod is ready before an old one is ended. An old pod leaves the " +
		"Service as a terminating endpoint, its process gets SIGTERM and SIGKILL after the " +
		"service's terminationGracePeriodSeconds. The fault's end waits (bounded) for the rollout " +
		"to complete; `for` should cover it. Each step is a ScalingReplicaSet event. In a " +
		"kubernetes environment drill makes the patch `kubectl rollout restart` makes " +
		"(spec.template.metadata.annotations[\"kubectl.kubernetes.io/restartedAt\"]) on the " +
		"Deployment named like the service in the run's namespace, and the Deployment " +
		"controller rolls it out with the Deployment's own strategy; only the keys `maxSurge` and " +
		"`maxUnavailable` the fault sets are written into spec.strategy.rollingUpdate (journaled " +
		"first, put back when the fault ends and by `drill cleanup`). drill watches the rollout " +
		"as `kubectl rollout status` does (observedGeneration, updatedReplicas, replicas, " +
		"availableReplicas) and emits a RolloutStep event each time they move. A paused " +
		"Deployment is refused (drill pauses nothing, so none stays paused); a rollout cannot be " +
		"undone, and a run killed mid-rollout leaves the controller to finish it. In a compose " +
		"environment the service's containers are restarted one after another (Compose has no " +
		"surge, so maxSurge and maxUnavailable do not apply): each is stopped with its " +
		"stop_grace_period, started again, and healthy (or running, without a healthcheck) before the " +
		"next; `drill cleanup` starts any container a killed run left stopped.",
	Example: `- name: roll-gateway
  type: rollout
  service: order-gateway
  maxSurge: 1
  maxUnavailable: 0
  at: 20s
  for: 60s`,
	// No Defaults: an unset maxSurge or maxUnavailable is 25% locally
	// ([RolloutBounds]) and the Deployment's own in kubernetes mode.
	CheckTarget: func(s *Scenario, f *Fault, report func(key, msg string)) {
		svc := serviceNamed(s, f.Service)
		if svc == nil {
			return
		}
		if s.Environment.Type == EnvCompose {
			return // no surge in Compose: composePlatformFault
		}
		surge, unav := RolloutBounds(*f)
		if s.Environment.Type == EnvKubernetes {
			// The replicas are the Deployment's: only two zeros are
			// certain to stall it.
			if f.MaxSurge != nil && f.MaxUnavailable != nil && surge.N == 0 && unav.N == 0 {
				report("", fmt.Sprintf("maxSurge %s and maxUnavailable %s are both 0: the rollout could never start a pod nor end one "+
					"(Kubernetes refuses it too); raise one of them", surge, unav))
			}
			return
		}
		n := max(svc.Replicas, 1)
		if surge.Of(n, true) == 0 && unav.Of(n, false) == 0 {
			report("", fmt.Sprintf("maxSurge %s and maxUnavailable %s both come to 0 pods of the %d replicas of service %s: "+
				"the rollout could never start a pod nor end one (Kubernetes refuses it too); raise one of them",
				surge, unav, n, svc.Name))
		}
	},
}

var drainSpec = FaultSpec{
	Type:           FaultDrain,
	Target:         TargetService,
	KubernetesOnly: true,
	Attrs:          []FaultAttr{{Key: "node"}, {Key: "pods"}},
	Doc: "Drains a node at `at` (kubernetes environment only), as `kubectl drain` does: the node " +
		"is cordoned (spec.unschedulable true), then each pod of the run's namespace on it is " +
		"evicted through the eviction API, which honours PodDisruptionBudgets (DaemonSet pods and " +
		"mirror pods are skipped, as kubectl skips them; pods already terminating are left to " +
		"end). A refused eviction is an EvictionRefused event and a finding, not retried. Which " +
		"node: `node` names it; otherwise it is the node of the service's pod named in `pods` " +
		"(one, <service>-i: the i-th pod of the selector by creation time), or of <service>-0. " +
		"The node is uncordoned when the fault ends, on every exit path, and by `drill cleanup` " +
		"after a killed run (the cordon is journaled first); a node drill found cordoned is left " +
		"as it was. The fault's end waits (bounded) for the evicted pods to be gone.",
	Example: `- name: drain-gateway-node
  type: drain
  service: order-gateway
  pods: [order-gateway-0]
  at: 20s
  for: 30s`,
	Check: func(f *Fault, report func(key, msg string)) {
		if f.Node != "" && len(f.Pods) > 0 {
			report("", "a drain names its node by node or by the pod in pods, not both")
		}
		if len(f.Pods) > 1 {
			report("pods", fmt.Sprintf("a drain drains the node of one pod; %d are named", len(f.Pods)))
		}
	},
	CheckTarget: func(s *Scenario, f *Fault, report func(key, msg string)) {
		svc := serviceNamed(s, f.Service)
		if svc == nil {
			return
		}
		for _, p := range f.Pods {
			i, err := strconv.Atoi(strings.TrimPrefix(p, svc.Name+"-"))
			if !strings.HasPrefix(p, svc.Name+"-") || err != nil || i < 0 || strconv.Itoa(i) != strings.TrimPrefix(p, svc.Name+"-") {
				report("pods", fmt.Sprintf("no pod %q: pods are named %s-<i>, the i-th pod of the selector by creation time (from 0)", p, svc.Name))
			}
		}
	},
}

// RolloutBounds returns f's maxSurge and maxUnavailable, each
// [DefaultRolloutBound] when unset (the local runtime's defaults, the
// Deployment's).
func RolloutBounds(f Fault) (maxSurge, maxUnavailable IntOrPercent) {
	maxSurge, maxUnavailable = DefaultRolloutBound, DefaultRolloutBound
	if f.MaxSurge != nil {
		maxSurge = *f.MaxSurge
	}
	if f.MaxUnavailable != nil {
		maxUnavailable = *f.MaxUnavailable
	}
	return maxSurge, maxUnavailable
}

// serviceNamed returns the service of s named name, or nil.
func serviceNamed(s *Scenario, name string) *Service {
	for i := range s.Services {
		if s.Services[i].Name == name {
			return &s.Services[i]
		}
	}
	return nil
}
