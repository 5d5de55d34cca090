package plan

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// DefaultReadyTimeout is how long a run waits for every replica to be
// ready before t=0 when timeline.readyTimeout is not set.
const DefaultReadyTimeout = 120 * time.Second

// defaultSetupTimeout is a setup step's timeout when it sets none.
const defaultSetupTimeout = 5 * time.Minute

// BringUp is what a run does before t=0: in a local environment it starts
// the dependencies, then each service in order (its setup step, then its
// replicas), and waits until every replica is ready; load starts after
// that. In kubernetes mode the services are the cluster's, found by
// selector.
type BringUp struct {
	// Environment is local, kubernetes or compose.
	Environment string `json:"environment"`
	// Dependencies are the dependencies started, e.g. "postgres
	// (PostgreSQL, mode auto)".
	Dependencies []string `json:"dependencies,omitempty"`
	// Services are the services, in the order they are brought up.
	Services []ServiceBringUp `json:"services,omitempty"`
	// ReadyTimeout bounds the wait for every replica to be ready, in ns
	// (local environment).
	ReadyTimeout time.Duration `json:"readyTimeout,omitempty"`
	// ComposeFile is the Compose file a compose environment brings up
	// (relative to the scenario); its services' replicas and healthchecks
	// are the file's.
	ComposeFile string `json:"composeFile,omitempty"`
	// Traefik says, for a Compose file that runs Traefik
	// (environment.compose.traefik), which service runs it, its entry
	// point, whether allowEmptyServices is on, and its routers as the
	// labels define them ("orders: PathPrefix(`/orders`) -> order-gateway:8080");
	// drill reads routing from its API and access log.
	Traefik string `json:"traefik,omitempty"`
}

// ServiceBringUp is one service's part of the bring-up.
type ServiceBringUp struct {
	Name string `json:"name"`
	// Replicas is the number of replicas started (local environment; 0 in
	// kubernetes mode, where the cluster decides).
	Replicas int `json:"replicas,omitempty"`
	// Selector finds the service's pods (kubernetes mode).
	Selector string `json:"selector,omitempty"`
	// Setup is the one-shot step run before the first replica starts, as
	// "<argv> (timeout <d>)"; "" when there is none. Redacted.
	Setup string `json:"setup,omitempty"`
	// Probes are the replicas' probes: startup, readiness, liveness.
	Probes []ProbeTiming `json:"probes,omitempty"`
}

// ProbeTiming is one probe and when it runs. Durations are in ns.
type ProbeTiming struct {
	// Kind is startup, readiness or liveness; Check what it does, e.g.
	// "GET /healthz/ready".
	Kind  string `json:"kind"`
	Check string `json:"check"`
	// InitialDelay, Period and Timeout are the probe's
	// initialDelaySeconds, periodSeconds and timeoutSeconds.
	InitialDelay time.Duration `json:"initialDelay"`
	Period       time.Duration `json:"period"`
	Timeout      time.Duration `json:"timeout"`
	// SuccessThreshold and FailureThreshold are the successes and
	// failures in a row that change the probe's state.
	SuccessThreshold int32 `json:"successThreshold"`
	FailureThreshold int32 `json:"failureThreshold"`
}

// bringUpOf describes what s brings up before t=0; details follow the
// redaction rules of rd.
func bringUpOf(s *scenario.Scenario, rd *redact.Redactor) *BringUp {
	b := &BringUp{Environment: string(s.Environment.Type)}
	if b.Environment == "" {
		b.Environment = string(scenario.EnvLocal)
	}
	local := b.Environment == string(scenario.EnvLocal)
	if c := s.Environment.Compose; c != nil {
		b.ComposeFile = c.File
		if c.Traefik != nil {
			b.Traefik = traefikOf(s)
		}
	}
	if local {
		b.ReadyTimeout = s.Timeline.ReadyTimeout.D()
		if b.ReadyTimeout <= 0 {
			b.ReadyTimeout = DefaultReadyTimeout
		}
	}
	for _, d := range s.Dependencies {
		switch {
		case d.Postgres != nil:
			mode := string(d.Postgres.Mode)
			if mode == "" {
				mode = string(scenario.PostgresAuto)
			}
			b.Dependencies = append(b.Dependencies, fmt.Sprintf("%s (PostgreSQL, mode %s)", d.Name, mode))
		case d.HTTPStub != nil:
			b.Dependencies = append(b.Dependencies, fmt.Sprintf("%s (HTTP stub answering %d after %s)", d.Name, d.HTTPStub.Status, d.HTTPStub.Latency.D()))
		default:
			b.Dependencies = append(b.Dependencies, d.Name)
		}
	}
	for _, sv := range s.Services {
		su := ServiceBringUp{Name: sv.Name, Selector: sv.Selector}
		if local {
			su.Replicas = max(sv.Replicas, 1)
		}
		if sv.Setup != nil {
			t := sv.Setup.Timeout.D()
			if t <= 0 {
				t = defaultSetupTimeout
			}
			argv := append(append([]string{}, sv.Setup.Command...), sv.Setup.Args...)
			su.Setup = fmt.Sprintf("%s (timeout %s)", strings.Join(rd.Args(argv), " "), t)
		}
		for _, p := range []struct {
			kind  string
			probe *scenario.Probe
		}{{"startup", sv.Probes.StartupProbe}, {"readiness", sv.Probes.ReadinessProbe}, {"liveness", sv.Probes.LivenessProbe}} {
			if p.probe != nil {
				su.Probes = append(su.Probes, probeTiming(p.kind, p.probe, rd))
			}
		}
		b.Services = append(b.Services, su)
	}
	return b
}

// probeTiming reads a probe with Kubernetes' defaults for unset fields.
func probeTiming(kind string, p *scenario.Probe, rd *redact.Redactor) ProbeTiming {
	or := func(v, def int32) int32 {
		if v == 0 {
			return def
		}
		return v
	}
	check := "?"
	switch {
	case p.HTTPGet != nil:
		check = "GET " + rd.Path(p.HTTPGet.Path)
	case p.TCPSocket != nil:
		check = "TCP connect"
	case p.Exec != nil:
		check = "exec " + strings.Join(rd.Args(p.Exec.Command), " ")
	}
	sec := func(n int32) time.Duration { return time.Duration(n) * time.Second }
	return ProbeTiming{Kind: kind, Check: check,
		InitialDelay: sec(p.InitialDelaySeconds), Period: sec(or(p.PeriodSeconds, 10)), Timeout: sec(or(p.TimeoutSeconds, 1)),
		SuccessThreshold: or(p.SuccessThreshold, 1), FailureThreshold: or(p.FailureThreshold, 3)}
}

// traefikOf describes the Traefik of s's Compose file; a file that does
// not load (validation says why) gives what the scenario names.
func traefikOf(s *scenario.Scenario) string {
	c := s.Environment.Compose
	blank := make(map[string]string, len(c.Env)) // values do not matter here
	for k := range c.Env {
		blank[k] = ""
	}
	p, err := composefile.Load(context.Background(), s.ComposePath(), c.Project, blank)
	if err != nil {
		return "service " + c.Traefik.Service
	}
	_, written := s.Positions["environment.compose.allowEmptyServices"]
	ts, err := scenario.ResolveTraefik(c, p, written)
	if err != nil {
		return "service " + c.Traefik.Service
	}
	out := fmt.Sprintf("service %s, entry point %s (port %d), allowEmptyServices %t", ts.Service, ts.EntryPoint, ts.EntryPort, ts.Static.AllowEmptyServices)
	if routes, err := composefile.ParseRoutes(p); err == nil {
		ports := map[string]string{}
		for _, b := range routes.Backends {
			ports[b.Name] = fmt.Sprintf("%s:%d", b.Owner, b.Port)
		}
		var rs []string
		for _, r := range routes.Routers {
			rs = append(rs, fmt.Sprintf("%s: %s -> %s", r.Name, r.Rule, ports[r.Service]))
		}
		if len(rs) > 0 {
			out += "; routers " + strings.Join(rs, ", ")
		}
	}
	return out
}
