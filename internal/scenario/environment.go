package scenario

import (
	"fmt"
	"strings"
	"time"
)

// EnvironmentType is where the system under test runs.
type EnvironmentType string

// Environment types.
const (
	// EnvLocal runs dependencies, Toxiproxy and services on this machine.
	EnvLocal EnvironmentType = "local"
	// EnvKubernetes reaches a cluster through kubeconfig.
	EnvKubernetes EnvironmentType = "kubernetes"
	// EnvCompose brings the team's own Docker Compose file up on this machine's
	// Docker engine and routes to it with Traefik's Docker-provider rules.
	EnvCompose EnvironmentType = "compose"
)

// Environment says where the system under test runs and what a run may touch.
type Environment struct {
	// Type is local (default), kubernetes or compose.
	Type EnvironmentType `yaml:"type,omitempty" json:"type,omitempty"`
	// Kubernetes is required when Type is kubernetes.
	Kubernetes *KubernetesEnv `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty"`
	// Local tunes how a local environment shares this machine's CPU between
	// drill and the system under test.
	Local *LocalEnv `yaml:"local,omitempty" json:"local,omitempty"`
	// Compose is required when Type is compose.
	Compose *ComposeEnv `yaml:"compose,omitempty" json:"compose,omitempty"`
}

// SUTPriority says how the system under test shares the CPU with drill in a
// local environment.
type SUTPriority string

// SUT priorities.
const (
	// SUTPriorityLower runs replicas and dependencies at a lower CPU weight
	// than drill (the default).
	SUTPriorityLower SUTPriority = "lower"
	// SUTPrioritySame runs them at drill's own weight.
	SUTPrioritySame SUTPriority = "same"
)

// LocalEnv tunes a local environment. On one machine the load generator
// stands in for clients on other machines, so by default drill gives its
// own process (the generator and the clock that judges it) CPU priority
// over the system under test.
type LocalEnv struct {
	// SUTPriority is lower (default) or same. lower: the services' replicas
	// and the throwaway PostgreSQL run in a cgroup of their own per run
	// (drill-<run>; on cgroup v1 cpu.shares 1024 per CPU, so all of them
	// together weigh as much as one busy thread per core; cpu.weight 25
	// against 100 on v2) where drill may create one, else at nice +5; same:
	// at drill's own weight (a CPU limit of a service is applied either
	// way).
	SUTPriority SUTPriority `yaml:"sutPriority,omitempty" json:"sutPriority,omitempty"`
	// EndpointLag is how long a local Service keeps routing to a pod that
	// a platform fault (pod-kill, rollout) deleted, while the pod's preStop
	// hook and SIGTERM start at once, as a cluster's proxies learn of a
	// deletion only after the EndpointSlice controller and their own sync
	// (kube-proxy in iptables mode syncs at most once a second by default;
	// HEALTH-ORD-001 MC-TR-01 allows 1,000 ms for the removal). Default 1s;
	// 0s: at once; at most 10s.
	EndpointLag *Duration `yaml:"endpointLag,omitempty" json:"endpointLag,omitempty"`
}

// DefaultEndpointLag is [LocalEnv.EndpointLag]'s default: 1 s.
const DefaultEndpointLag = time.Second

// maxEndpointLag bounds [LocalEnv.EndpointLag]: 10 s.
const maxEndpointLag = 10 * time.Second

// KubernetesEnv is the allow-list a kubernetes run is held to: drill refuses
// any kubeconfig context or namespace not listed (exit 2, nothing touched).
type KubernetesEnv struct {
	// AllowedContexts lists kubeconfig context names the run may use; at
	// least one is required.
	AllowedContexts []string `yaml:"allowedContexts" json:"allowedContexts"`
	// AllowedNamespaces lists namespaces the run may touch; default: only
	// Namespace.
	AllowedNamespaces []string `yaml:"allowedNamespaces,omitempty" json:"allowedNamespaces,omitempty"`
	// Namespace is the namespace a run uses unless -n/--namespace names
	// another allowed one.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	EnvironmentTypes = []string{string(EnvCompose), string(EnvKubernetes), string(EnvLocal)}
	SUTPriorities    = []string{string(SUTPriorityLower), string(SUTPrioritySame)}
)

func (v *validator) environment() {
	e := v.s.Environment
	if e.Compose != nil && e.Type != EnvCompose {
		v.errorf("environment.compose", "applies only to environment type compose")
	}
	switch e.Type {
	case EnvLocal:
		if e.Kubernetes != nil {
			v.errorf("environment.kubernetes", "applies only to environment type kubernetes")
		}
		if e.Local != nil && e.Local.EndpointLag != nil {
			if d := e.Local.EndpointLag.Duration; d < 0 || d > maxEndpointLag {
				v.errorf("environment.local.endpointLag", "must be between 0s and %s, got %s", maxEndpointLag, d)
			}
		}
		if e.Local != nil && e.Local.SUTPriority != "" && !oneOf(string(e.Local.SUTPriority), SUTPriorities) {
			v.errorf("environment.local.sutPriority", "%s", unknownValue("sutPriority", string(e.Local.SUTPriority), SUTPriorities))
		}
	case EnvKubernetes:
		if e.Local != nil {
			v.errorf("environment.local", "applies only to environment type local")
		}
		if e.Kubernetes == nil || len(e.Kubernetes.AllowedContexts) == 0 {
			v.errorf("environment", "a kubernetes environment must list the contexts a run may use in environment.kubernetes.allowedContexts (drill refuses any other)")
			break
		}
		for i, c := range e.Kubernetes.AllowedContexts {
			if strings.TrimSpace(c) == "" {
				v.errorf(fmt.Sprintf("environment.kubernetes.allowedContexts[%d]", i), "context name is empty")
			}
		}
		if ns := e.Kubernetes.Namespace; ns != "" && !oneOf(ns, e.Kubernetes.AllowedNamespaces) {
			v.errorf("environment.kubernetes.namespace", "namespace %q is not in allowedNamespaces (%s)", ns, strings.Join(e.Kubernetes.AllowedNamespaces, ", "))
		}
		for i, ns := range e.Kubernetes.AllowedNamespaces {
			if !dnsLabelRE.MatchString(ns) {
				v.errorf(fmt.Sprintf("environment.kubernetes.allowedNamespaces[%d]", i), "invalid namespace %q", ns)
			}
		}
	case EnvCompose:
		v.composeEnv()
	default:
		v.errorf("environment.type", "%s", unknownValue("environment type", string(e.Type), EnvironmentTypes))
	}
}
