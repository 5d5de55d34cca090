package scenario

import (
	"fmt"
)

// FaultType names a fault kind.
type FaultType string

// Fault is one injected fault, on at At and off at At+For.
type Fault struct {
	// Name is unique; it names the fault:<name> and recovery:<name> windows.
	Name string `yaml:"name" json:"name"`
	// Type is a toxic type, down, process-pause or container-pause.
	Type FaultType `yaml:"type" json:"type"`
	// Proxy names a proxy (toxics and down).
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`
	// Dependency names a local dependency (process-pause, container-pause).
	Dependency string `yaml:"dependency,omitempty" json:"dependency,omitempty"`
	// Service names a service of services[] whose pods the fault ends
	// (pod-kill, rollout).
	Service string `yaml:"service,omitempty" json:"service,omitempty"`
	// Stream is upstream (client->server bytes), downstream (default), or both.
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Toxicity is the probability 0..1 that a connection is affected; default 1.
	Toxicity *float64 `yaml:"toxicity,omitempty" json:"toxicity,omitempty"`
	// At is when the fault turns on, from t=0; required. "manual" leaves
	// the start to an operator on the console (drill run --ui).
	At Duration `yaml:"at" json:"at"`
	// For is how long it stays on; required, > 0. "manual" keeps it on
	// until an operator ends it or the run ends.
	For Duration `yaml:"for" json:"for"`
	// ManualStart is set by "at: manual": an operator starts the fault
	// from the console (At is then 0 and unused).
	ManualStart bool `yaml:"-" json:"manualStart,omitempty"`
	// ManualEnd is set by "for: manual": the fault stays on until an
	// operator ends it or the run ends (For is then 0 and unused).
	ManualEnd bool `yaml:"-" json:"manualEnd,omitempty"`

	// Latency (latency toxic), rounded to ms.
	Latency *Duration `yaml:"latency,omitempty" json:"latency,omitempty"`
	// Jitter (latency toxic), rounded to ms; must be <= Latency.
	Jitter *Duration `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	// Timeout (timeout, reset_peer toxics), rounded to ms; 0 = hold forever.
	Timeout *Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Rate (bandwidth toxic) in KB/s (1 KB = 1000 bytes).
	RateKBps *int64 `yaml:"rateKBps,omitempty" json:"rateKBps,omitempty"`
	// Delay (slow_close: ms; slicer: µs).
	Delay *Duration `yaml:"delay,omitempty" json:"delay,omitempty"`
	// AverageSize (slicer) is the average chunk size in bytes.
	AverageSize *ByteSize `yaml:"averageSize,omitempty" json:"averageSize,omitempty"`
	// SizeVariation (slicer) in bytes; must be below AverageSize.
	SizeVariation *ByteSize `yaml:"sizeVariation,omitempty" json:"sizeVariation,omitempty"`
	// Bytes (limit_data) per connection per direction.
	Bytes *ByteSize `yaml:"bytes,omitempty" json:"bytes,omitempty"`
	// Count (pod-kill) is how many of the service's pods end, chosen at
	// random with Seed; default 1 when neither percent nor pods is set.
	Count *int `yaml:"count,omitempty" json:"count,omitempty"`
	// Percent (pod-kill) is the share of the declared replicas that end,
	// 1..100, rounded up to whole pods, chosen at random with Seed.
	Percent *int `yaml:"percent,omitempty" json:"percent,omitempty"`
	// Pods (pod-kill) names the pods that end by replica: s-i is replica
	// i of service s (or the pod that has replaced it since), e.g.
	// order-gateway-0.
	Pods []string `yaml:"pods,omitempty" json:"pods,omitempty"`
	// Seed (pod-kill) seeds the random choice of pods; default: drawn
	// when the run starts, and recorded with the fault's events.
	Seed *int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// Signal (pod-kill) is how the pods end: SIGTERM with the grace
	// period, as the kubelet ends a deleted pod, or SIGKILL at once;
	// default SIGTERM. In kubernetes mode SIGKILL deletes (or evicts) with
	// gracePeriodSeconds 0.
	Signal string `yaml:"signal,omitempty" json:"signal,omitempty"`
	// Node (drain) names the node to drain; default: the node of the
	// service's pod named in Pods, or of its pod <service>-0.
	Node string `yaml:"node,omitempty" json:"node,omitempty"`
	// Evict (pod-kill, kubernetes environment only) ends the pods through
	// the eviction API, which honours PodDisruptionBudgets, instead of
	// deleting them; default false.
	Evict *bool `yaml:"evict,omitempty" json:"evict,omitempty"`
	// MaxSurge (rollout) is how many pods may run above the declared
	// replicas, a count or a percentage rounded up. Unset: 25% locally,
	// and in kubernetes mode the Deployment's own strategy is left alone.
	MaxSurge *IntOrPercent `yaml:"maxSurge,omitempty" json:"maxSurge,omitempty"`
	// MaxUnavailable (rollout) is how many of the declared replicas may be
	// unavailable, a count or a percentage rounded down. Unset: 25%
	// locally, and in kubernetes mode the Deployment's own.
	MaxUnavailable *IntOrPercent `yaml:"maxUnavailable,omitempty" json:"maxUnavailable,omitempty"`
}

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	FaultStreams = []string{"both", "downstream", "upstream"}
)

func (v *validator) faults() {
	s := v.s
	names := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		names[i] = f.Name
	}
	v.unique("fault", names, func(i int) string { return fmt.Sprintf("faults[%d]", i) })
	proxies := map[string]bool{}
	for _, p := range s.Proxies {
		proxies[p.Name] = true
	}
	deps := map[string]*Dependency{}
	for i := range s.Dependencies {
		deps[s.Dependencies[i].Name] = &s.Dependencies[i]
	}
	svcs := map[string]bool{}
	for _, sv := range s.Services {
		svcs[sv.Name] = true
	}
	t := s.Timeline
	for i := range s.Faults {
		f := &s.Faults[i]
		p := fmt.Sprintf("faults[%d]", i)
		sp, known := FaultSpecOf(f.Type)
		report := func(key, msg string) {
			if key == "" {
				v.errorf(p, "%s", msg)
				return
			}
			v.errorf(p+"."+key, "%s", msg)
		}
		checkFault(f, report)
		if !known {
			continue
		}
		// What checkFault cannot see: whether the target exists (a missing
		// one was reported), the kind's rules about it, the environment.
		target, exists := f.Proxy, proxies[f.Proxy]
		switch sp.Target {
		case TargetDependency:
			target, exists = f.Dependency, deps[f.Dependency] != nil || v.composeTarget(f)
		case TargetService:
			target, exists = f.Service, svcs[f.Service]
		}
		switch {
		case target == "":
		case !exists && sp.Target == TargetProxy:
			v.errorf(p+".proxy", "no proxy named %q%s", f.Proxy, knownNames(mapKeys(proxies)))
		case !exists && sp.Target == TargetService:
			v.errorf(p+".service", "no service named %q%s", f.Service, knownNames(mapKeys(svcs)))
		case !exists:
			v.errorf(p+".dependency", "no dependency named %q%s", f.Dependency, knownNames(depNames(s)))
		case sp.CheckTarget != nil:
			sp.CheckTarget(s, f, report)
		}
		if sp.Target == TargetService && s.Environment.Type == EnvCompose && !sp.KubernetesOnly {
			v.composePlatformFault(p, f)
		}
		if sp.KubernetesOnly && s.Environment.Type != EnvKubernetes {
			v.errorf(p+".type", "%s applies only in a kubernetes environment (it acts on a node through the cluster's API); use pod-kill in a %s environment", f.Type, s.Environment.Type)
		}
		if f.Evict != nil && s.Environment.Type != EnvKubernetes {
			v.errorf(p+".evict", "evict applies only in a kubernetes environment (the eviction API of the cluster); leave it out in a %s environment", s.Environment.Type)
		}
		if sp.Target == TargetDependency && s.Environment.Type == EnvKubernetes {
			v.errorf(p+".type", "%s faults act on local dependencies; use a toxic or down on a proxy in a kubernetes environment", f.Type)
		}
		if f.ManualStart || f.ManualEnd {
			v.validateManual(p, *f)
			continue
		}
		switch on, off := f.At.D(), f.At.D()+f.For.D(); {
		case f.For.D() <= 0:
			v.errorf(p+".for", "for must be above 0")
		case on < t.Warmup.D():
			v.errorf(p+".at", "fault starts (%s) inside the warmup (%s); start it at or after the warmup", on, t.Warmup.D())
		case off > t.Duration.D():
			v.errorf(p+".for", "fault ends (%s) after the run (duration %s)", off, t.Duration.D())
		}
	}
}
