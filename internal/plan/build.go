package plan

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/scenario"
)

// Build turns a scenario into its plan. The scenario must have had
// [scenario.Scenario.SetDefaults] applied and should have passed
// [scenario.Scenario.Validate] ([scenario.Load] does both).
//
// Windows are those of [scenario.Scenario.Spans]: run = [warmup, duration),
// baseline = [warmup, first fault on) (absent without faults),
// fault:<name> = [at, at+for), recovery:<name> = [at+for,
// min(at+for+timeline.recovery, duration)), then the user's windows.
// Actions are sorted by time; at equal times offs and stops come before
// starts and ons, and run-end comes last. Each assertion becomes a
// judgement of its window. BringUp says what happens before t=0. Action
// and setup details follow the redaction rules
// (internal/redact): a URL's password and sensitive query values read
// REDACTED. Build fails when an assertion names a window that does not
// exist.
func Build(s *scenario.Scenario) (*Plan, error) {
	if s == nil {
		return nil, fmt.Errorf("build plan: no scenario")
	}
	p := &Plan{
		Scenario: s.Metadata.Name,
		Duration: s.Timeline.Duration.D(),
		Warmup:   s.Timeline.Warmup.D(),
	}
	// Details are printed and recorded: they follow the redaction rules.
	rd := s.Redactor()
	for _, st := range s.Streams {
		start := st.Start.D()
		p.Actions = append(p.Actions,
			Action{At: start, Kind: StreamStart, Target: st.Name, Detail: rd.Text(describeStream(st))},
			Action{At: start + st.Duration.D(), Kind: StreamStop, Target: st.Name})
	}
	for _, f := range s.Faults {
		// A manual start or end is an operator's (drill run --ui): no
		// scheduled action; the windows follow the actual times.
		if f.ManualStart {
			continue
		}
		p.Actions = append(p.Actions, Action{At: f.At.D(), Kind: FaultOn, Target: f.Name, Detail: rd.Text(describeFault(s, f))})
		if !f.ManualEnd {
			p.Actions = append(p.Actions, Action{At: f.At.D() + f.For.D(), Kind: FaultOff, Target: f.Name})
		}
	}
	p.Actions = append(p.Actions, Action{At: p.Duration, Kind: RunEnd, Target: s.Metadata.Name})
	sort.SliceStable(p.Actions, func(i, j int) bool {
		a, b := p.Actions[i], p.Actions[j]
		if a.At != b.At {
			return a.At < b.At
		}
		return actionOrder[a.Kind] < actionOrder[b.Kind]
	})
	manual := map[string]bool{}
	for _, f := range s.Faults {
		manual[f.Name] = f.ManualStart || f.ManualEnd
	}
	for _, sp := range s.Spans() {
		p.Windows = append(p.Windows, Window{Name: sp.Name, Start: sp.From, End: sp.To, Fault: sp.Fault, Manual: sp.Fault != "" && manual[sp.Fault]})
	}
	for _, a := range s.Assertions {
		if _, ok := p.Window(a.Window); !ok {
			return nil, fmt.Errorf("build plan: assertion %q judges window %q, which does not exist", a.Name, a.Window)
		}
		j := Judgement{Assertion: a.Name, Type: string(a.Type), Window: a.Window, ExpectFail: s.ExpectedFail(a.Name)}
		if a.Type == scenario.AssertRestarts {
			// The restarts judge's rule: includeStartup, by default only
			// over the run window.
			j.IncludeStartup = a.Window == scenario.WindowRun
			if a.IncludeStartup != nil {
				j.IncludeStartup = *a.IncludeStartup
			}
		}
		p.Judgements = append(p.Judgements, j)
	}
	p.BringUp = bringUpOf(s, rd)
	return p, nil
}

// actionOrder orders actions at the same instant.
var actionOrder = map[ActionKind]int{FaultOff: 0, StreamStop: 1, StreamStart: 2, FaultOn: 3, RunEnd: 4}

// describeStream summarises targets and load shape, e.g.
// "POST http://.../orders at 2800/s".
func describeStream(st scenario.Stream) string {
	var target string
	switch {
	case len(st.Targets) == 1:
		target = st.Targets[0].Method + " " + st.Targets[0].URL
	case len(st.Targets) > 1:
		target = fmt.Sprintf("%d targets round-robin (%s %s, ...)", len(st.Targets), st.Targets[0].Method, st.Targets[0].URL)
	case st.TargetsFile != nil:
		target = "targets from " + st.TargetsFile.Path
	}
	var shape string
	switch {
	case st.Rate != nil:
		shape = "at " + st.Rate.String()
	case st.Ramp != nil:
		shape = fmt.Sprintf("ramp %s -> %s over %s", st.Ramp.From, st.Ramp.To, st.Duration.D())
	case len(st.Steps) > 0:
		parts := make([]string, len(st.Steps))
		for i, s := range st.Steps {
			parts[i] = fmt.Sprintf("%s for %s", s.Rate, s.For.D())
		}
		shape = "steps " + strings.Join(parts, ", then ")
	}
	out := strings.TrimSpace(target + " " + shape)
	if st.Timeout.D() > 0 {
		out += fmt.Sprintf(", timeout %s", st.Timeout.D())
	}
	if n := st.MaxRetries(); n > 0 {
		out += ", " + describeRetry(st.Retry, n+1)
	}
	if len(st.Checks) > 0 {
		names := make([]string, len(st.Checks))
		for i, c := range st.Checks {
			names[i] = c.Name
		}
		out += ", checks " + strings.Join(names, ", ")
	}
	return out
}

// describeRetry summarises a stream's retry policy with its attempts
// (the first included), e.g. "retry fixed every 50ms, up to 6 attempts
// on 503, numbered in X-Retry-Attempt".
func describeRetry(r *scenario.Retry, attempts int) string {
	out := "retry " + string(r.Policy)
	iv := r.Interval.D()
	if iv <= 0 {
		iv = 50 * time.Millisecond
	}
	if r.Policy == scenario.RetryAfter {
		out += fmt.Sprintf(" (else every %s)", iv)
	} else {
		out += fmt.Sprintf(" every %s", iv)
	}
	out += fmt.Sprintf(", up to %d attempts", attempts)
	if len(r.On) > 0 {
		codes := make([]string, len(r.On))
		for i, c := range r.On {
			codes[i] = strconv.Itoa(c)
		}
		out += " on " + strings.Join(codes, ", ")
	}
	if r.AttemptHeader != "" {
		out += ", numbered in " + r.AttemptHeader
	}
	return out
}

// describeFault summarises a fault of s, e.g.
// "latency latency=8s stream=downstream on proxy tax-api": its type, the
// keys of its kind as the fault spec prints them, then where it acts. A
// rollout also names the bounds it will run with (see [rolloutBounds]).
func describeFault(s *scenario.Scenario, f scenario.Fault) string {
	parts := append([]string{string(f.Type)}, f.AttributeText()...)
	if s.Environment.Type == scenario.EnvCompose && (f.Type == scenario.FaultRollout || f.Type == scenario.FaultPodKill) {
		parts = append(parts, composePlatform(s, f))
	} else if f.Type == scenario.FaultRollout {
		if b := rolloutBounds(s, f); b != "" {
			parts = append(parts, b)
		}
	}
	if f.Stream != "" {
		parts = append(parts, "stream="+f.Stream)
	}
	if f.Toxicity != nil && *f.Toxicity != 1 {
		parts = append(parts, fmt.Sprintf("toxicity=%g", *f.Toxicity))
	}
	if f.Proxy != "" {
		parts = append(parts, "on proxy "+f.Proxy)
	}
	if f.Dependency != "" {
		parts = append(parts, "on dependency "+f.Dependency)
	}
	if f.Service != "" {
		parts = append(parts, "on service "+f.Service)
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" for %s", f.For.D())
}

// composePlatform says how a pod-kill or rollout of a Compose service
// goes: its one container stopped with the service's stop grace period
// (the Compose file's stop_grace_period, or the engine's 10 s) and
// started again by drill; a rollout does so one container after another.
func composePlatform(s *scenario.Scenario, f scenario.Fault) string {
	grace := "the service's stop grace period"
	if c := s.Environment.Compose; c != nil {
		blank := make(map[string]string, len(c.Env)) // values do not matter here
		for k := range c.Env {
			blank[k] = ""
		}
		if p, err := composefile.Load(context.Background(), s.ComposePath(), c.Project, blank); err == nil {
			if svc, ok := p.Service(f.Service); ok {
				grace = "stop grace period " + svc.Grace().String()
			}
		}
	}
	if f.Type == scenario.FaultRollout {
		return "(one container after another, each stopped with its " + grace + ", started again by drill and serving before the next: Compose has no surge)"
	}
	if f.Signal == scenario.SignalKill {
		return "(the container is killed, then started again by drill)"
	}
	return "(the container is stopped with its " + grace + ", then started again by drill)"
}

// rolloutBounds says which maxSurge and maxUnavailable a rollout of s runs
// with. Locally they are the fault's or the 25 % defaults, shown as pods of
// the service's replicas, e.g. "(of 3 replicas: maxSurge 25% = 1 pod,
// maxUnavailable 25% = 0 pods)"; in kubernetes mode the keys the fault leaves unset are
// the Deployment's own.
func rolloutBounds(s *scenario.Scenario, f scenario.Fault) string {
	if s.Environment.Type == scenario.EnvKubernetes {
		switch {
		case f.MaxSurge == nil && f.MaxUnavailable == nil:
			return "(the Deployment's own maxSurge and maxUnavailable)"
		case f.MaxSurge == nil:
			return "(the Deployment's own maxSurge)"
		case f.MaxUnavailable == nil:
			return "(the Deployment's own maxUnavailable)"
		}
		return ""
	}
	replicas := 1
	for _, svc := range s.Services {
		if svc.Name == f.Service {
			replicas = max(svc.Replicas, 1)
		}
	}
	surge, unav := scenario.RolloutBounds(f)
	return fmt.Sprintf("(of %d replicas: maxSurge %s = %s, maxUnavailable %s = %s)",
		replicas, surge, pods(surge.Of(replicas, true)), unav, pods(unav.Of(replicas, false)))
}

// pods renders n pods, e.g. "1 pod", "0 pods".
func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// FormatOffset renders an offset from t=0 as "t+20.000s" (ms resolution).
func FormatOffset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("t%s%d.%03ds", sign, d/time.Second, (d%time.Second)/time.Millisecond)
}
