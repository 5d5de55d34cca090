package localenv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// TestRestartDatedByKill: a replica killed by its liveness probe while a
// fault is on has its restart dated by the kill decision, inside the fault,
// whether its process exits at once on SIGTERM or lingers for longer than
// the rest of the fault; the start of the new process is its own event
// (PodStarted), after the shutdown, and the findings count the restart in
// the fault. The fault here is the span in which the
// liveness endpoint fails (6 s from the test's switch; two failures a
// second apart kill); the bounds are generous: only the kill has to land
// within 6 s of the switch.
func TestRestartDatedByKill(t *testing.T) {
	t.Parallel()
	const faultLen = 6 * time.Second
	for _, tc := range []struct {
		name   string
		linger time.Duration // how long the process takes to exit after SIGTERM
	}{
		{"exits at once", 0},
		{"shuts down for 8s", 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if tc.linger > 0 {
				env["TERM_LINGER"] = tc.linger.String()
			}
			h := startService(t, ServiceSpec{Name: "slow", Replicas: 1, Env: env, Grace: 30 * time.Second,
				Probes: scenario.Probes{LivenessProbe: httpProbe("/live", 1, 2, 0)}})
			const pod = "slow-0"
			h.waitReady(1)
			h.waitEvents("a liveness success", 1, func(e event.Event) bool { return isProbe(event.ProbeLiveness, pod)(e) && e.OK })

			faultOn := h.clock.Now()
			h.control(pod, "live=503")
			faultOff := faultOn + faultLen

			started := h.waitEvents("the new process", 2, isKind(event.PodStarted, pod))[1]
			evs := h.podEvents(pod)
			kill := evs[index(evs, 0, func(e event.Event) bool { return e.Kind == event.K8sEvent && e.Reason == "Killing" })]
			restart := h.waitEvents("the restart", 1, isKind(event.ContainerRestart, pod))[0]
			span := fmt.Sprintf("fault [%s, %s), Killing at %s, restart at %s, new process at %s",
				faultOn, faultOff, kill.At, restart.At, started.At)

			if kill.At < faultOn || kill.At >= faultOff {
				t.Fatalf("the kill fell outside the fault (the machine too busy to probe in time?): %s\n%s", span, h.dump())
			}
			if restart.At != kill.At || restart.Probe != event.ProbeLiveness || restart.RestartCount != 1 {
				t.Errorf("restart %+v: want restartCount 1 by liveness, dated by the kill decision: %s", restart, span)
			}
			if restart.At < faultOn || restart.At >= faultOff {
				t.Errorf("the restart is dated outside the fault: %s", span)
			}
			if started.RestartCount != 1 || started.At <= restart.At {
				t.Errorf("new process rc=%d: want restartCount 1, after the restart: %s", started.RestartCount, span)
			}
			if got := started.At - kill.At; got < tc.linger {
				t.Errorf("the new process started %s after the kill, before the old one's %s shutdown: %s", got, tc.linger, span)
			}
			if tc.linger > faultLen && started.At < faultOff {
				t.Errorf("the new process started inside the fault although the old one lingered %s: %s", tc.linger, span)
			}

			// The findings count it in the fault, as a warning.
			p := &plan.Plan{Scenario: "slow", Duration: started.At + 10*time.Second, Actions: []plan.Action{
				{At: faultOn, Kind: plan.FaultOn, Target: "pg-pause"}, {At: faultOff, Kind: plan.FaultOff, Target: "pg-pause"}}}
			var fd *findings.Finding
			all := findings.Compute(findings.Input{Plan: p, Events: h.log.Events()})
			for i := range all {
				if all[i].Kind == findings.KindRestarts && all[i].Service == "slow" {
					fd = &all[i]
				}
			}
			if fd == nil || fd.Rule != findings.RuleRestartDuringFault || !strings.Contains(fd.Text, "1 during pg-pause") {
				t.Errorf("restarts finding %+v: want the restart counted during pg-pause (%s)", fd, span)
			}
		})
	}
}

// TestRestartDatedByCrash: a restart after a crash (an exit nobody asked
// for) is dated by the exit, not by the start of the next process, which
// the CrashLoopBackOff (3 s here) holds back on the second crash.
func TestRestartDatedByCrash(t *testing.T) {
	t.Parallel()
	const backoff = 3 * time.Second
	spec := ServiceSpec{Name: "crash", Replicas: 1}
	spec.Options.BackoffBase = backoff
	h := startService(t, spec)
	const pod = "crash-0"
	h.waitReady(1)

	var exits []time.Duration
	for n := 1; n <= 2; n++ {
		waitListening(t, h.svc.Status()[0].Port)
		exits = append(exits, h.clock.Now())
		h.control(pod, "exit=3") // exits 50 ms after answering
		h.waitEvents("the new process", n+1, isKind(event.PodStarted, pod))
	}
	restarts := h.waitEvents("two restarts", 2, isKind(event.ContainerRestart, pod))
	starts := h.waitEvents("three processes", 3, isKind(event.PodStarted, pod))
	for i, r := range restarts {
		span := fmt.Sprintf("exit asked at %s, restart at %s, new process at %s", exits[i], r.At, starts[i+1].At)
		if r.Probe != "" || r.RestartCount != int32(i+1) {
			t.Errorf("restart %d: %+v, want restartCount %d and no probe", i+1, r, i+1)
		}
		// Exit is 50 ms after the request; 2 s of slack for a busy machine.
		if r.At < exits[i] || r.At >= exits[i]+2*time.Second {
			t.Errorf("restart %d is not dated by the exit: %s\n%s", i+1, span, h.dump())
		}
		if starts[i+1].At < r.At {
			t.Errorf("restart %d: the new process started before the restart's date: %s", i+1, span)
		}
		if i == 1 && starts[i+1].At-r.At < backoff-500*time.Millisecond {
			t.Errorf("second restart: the new process came %s after the exit, want the %s back-off between: %s",
				starts[i+1].At-r.At, backoff, span)
		}
	}
}
