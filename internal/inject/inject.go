// Package inject applies drill's faults and guarantees they are undone.
//
// The core is tiny: an [Injector] applies one fault and returns its [Revert].
// Each fault kind lives in its own file and registers a constructor under its
// scenario name (latency, timeout, bandwidth, slow_close, reset_peer, slicer,
// limit_data, down, process-pause, container-pause, pod-kill, rollout,
// drain); [Build] looks the kind
// up, and an unknown kind lists the known ones, sorted. What a fault of a
// kind may and must set, and its rules, are the kind's
// [scenario.FaultSpec]: Build checks a fault with [scenario.CheckFault]
// (a validated scenario passes) and the injectors trust it.
//
// Safety (docs/DESIGN.md §16): every toxic is named drill-<run id>-<fault>
// (with -up/-down for stream both), every fault is written to a [Journal]
// BEFORE it is applied and marked reverted after, reverts are pushed onto a
// [Stack] that runs on every exit path with a fresh timeout each, [Verify]
// reads the proxies back afterwards, and [Cleanup] removes what a killed run
// left behind.
//
// # A timeout-0 pause is not "down"
//
// The PostgreSQL pause of the seed drills is a timeout toxic with timeout 0
// on both streams. Connections stay ESTABLISHED, new connections are
// accepted by the proxy (the kernel completes the handshake), and every byte
// is swallowed: clients hang until their own timeouts fire, the way a frozen
// or partitioned database looks. When the toxic is removed Toxiproxy CLOSES
// the connections that were held (its CleanupToxic, to avoid a corrupt
// stream): a query blocked during the pause returns an error right after the
// pause ends, and only new connections work at normal latency. A process or
// container pause (SIGSTOP, cgroup freeze) is the variant where held
// connections survive and resume.
//
// "down" disables the proxy: the listener closes and every connection is
// dropped, so clients fail fast with "connection refused" or a reset. A
// service with sane timeouts sees errors at once under "down" but sees slow
// requests, exhausted pools and timeouts under a pause, which is the harder
// failure and the one that trips liveness probes that touch the database.
package inject

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/scenario"
)

// Revert undoes one applied fault. It is bounded by ctx and may be called
// again after an error (a retry); a Revert from [Stack.Push] runs at most
// once successfully.
type Revert func(ctx context.Context) error

// Injector applies one fault. Inject records the fault in the journal before
// touching anything, then applies it. On error nothing stays applied (a
// partly applied fault is reverted before Inject returns), and the returned
// Revert is nil.
type Injector interface {
	Inject(ctx context.Context) (Revert, error)
}

// Describer is an optional [Injector] capability: a one-line human
// description, e.g. `timeout 0ms on proxy pg (both streams)`.
type Describer interface {
	Describe() string
}

// Env is what injectors need from the run.
type Env struct {
	// Toxiproxy serves toxics and down; required for those kinds.
	Toxiproxy Toxiproxy
	// RunID names every toxic (drill-<RunID>-<fault>); required.
	RunID string
	// Journal records faults before they are applied; nil disables journaling
	// (tests only: a killed run could then not be cleaned up).
	Journal *Journal
	// Processes maps a dependency name to the process group id of its
	// process tree (process-pause).
	Processes map[string]int
	// Containers maps a dependency name to its container id (container-pause).
	Containers map[string]string
	// Services maps a local service's name to its pods (pod-kill,
	// rollout).
	Services map[string]PodSet
	// Kube is the cluster of a kubernetes run, whose services' pods and
	// Deployments pod-kill and rollout act on; nil in other environments.
	Kube *KubeEnv
	// Compose is the project of a compose run, whose services'
	// containers pod-kill and rollout act on; nil in other environments.
	Compose *ComposeEnv
	// Docker pauses containers; nil: a client for the local Docker engine is
	// created on first use.
	Docker ContainerPauser
	// Log gets one line per applied and reverted fault; nil discards.
	Log *slog.Logger
}

// kubeSelector returns the label selector of service in a kubernetes
// run, and whether it is one.
func (e *Env) kubeSelector(service string) (string, bool) {
	if e.Kube == nil || e.Kube.Client == nil {
		return "", false
	}
	sel, ok := e.Kube.Selectors[service]
	return sel, ok && sel != ""
}

func (e *Env) logger() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// constructor builds an injector for one fault. The fault has passed
// [scenario.CheckFault] and has its kind's defaults applied: a constructor
// checks only what the run's environment must provide (a Toxiproxy, the
// dependency's process or container), never the fault's own keys.
type constructor func(f scenario.Fault, env *Env) (Injector, error)

// registry maps a fault type to its constructor. Filled by register calls in
// each kind's file, before main runs; read-only afterwards.
var registry = map[scenario.FaultType]constructor{}

// register adds a kind. It panics on an empty name, a nil constructor or a
// duplicate: these are programming errors caught by any test.
func register(kind scenario.FaultType, c constructor) {
	if kind == "" || c == nil {
		panic("inject: register with empty kind or nil constructor")
	}
	if _, dup := registry[kind]; dup {
		panic("inject: kind registered twice: " + string(kind))
	}
	registry[kind] = c
}

// Kinds returns the registered fault kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// Build returns the injector for f. Errors name the fault: an unknown kind
// lists the known ones; a fault its kind's spec refuses (it was not
// validated) carries [scenario.CheckFault]'s message; an environment that
// lacks what the kind acts on says what is missing.
func Build(f scenario.Fault, env *Env) (Injector, error) {
	c, ok := registry[f.Type]
	if !ok {
		return nil, fmt.Errorf("fault %q: unknown type %q; available: %s", f.Name, f.Type, strings.Join(Kinds(), ", "))
	}
	if env == nil {
		return nil, fmt.Errorf("fault %q: no environment", f.Name)
	}
	if env.RunID == "" {
		return nil, fmt.Errorf("fault %q: no run id", f.Name)
	}
	if err := validName(f.Name); err != nil {
		return nil, fmt.Errorf("fault %q: name: %w", f.Name, err)
	}
	// A validated fault passes; Build may also be handed one that was not.
	if err := scenario.CheckFault(f); err != nil {
		return nil, fmt.Errorf("fault %q (%s): %w", f.Name, f.Type, err)
	}
	inj, err := c(f.WithDefaults(), env)
	if err != nil {
		return nil, fmt.Errorf("fault %q (%s): %w", f.Name, f.Type, err)
	}
	return inj, nil
}

// validName accepts names that are safe inside a toxic name and a URL path.
func validName(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q has %q; use letters, digits, '-', '_' or '.'", s, r)
		}
	}
	return nil
}
