package nodeagent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drillhq/drill/internal/localenv"
)

func condition(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := t0.Add(2 * time.Second)
	view := func(r *localenv.ReplicaStatus) podView {
		return podView{podIP: "192.0.2.9", hostIP: "192.0.2.1", container: "app", image: "img", startTime: t0, replica: r}
	}
	lastTerm := &localenv.Termination{ExitCode: 137, Signal: 9, Reason: "Error", Message: "liveness probe failed 3 times",
		StartedAt: t0, FinishedAt: t0.Add(40 * time.Second)}
	tests := []struct {
		name         string
		view         podView
		phase        corev1.PodPhase
		ready        bool
		state        string // running, waiting, terminated
		reason       string // waiting/terminated reason
		restarts     int32
		lastExitCode int32 // -1: no lastState
	}{
		{"not started yet", podView{podIP: "192.0.2.9", hostIP: "192.0.2.1", container: "app", startTime: t0,
			waitingReason: "CreateContainerConfigError", waitingMessage: "no Secret"},
			corev1.PodPending, false, "waiting", "CreateContainerConfigError", 0, -1},
		{"running, not ready", view(&localenv.ReplicaStatus{PID: 10, State: localenv.StateRunning, StartedAt: started}),
			corev1.PodRunning, false, "running", "", 0, -1},
		{"running, ready", view(&localenv.ReplicaStatus{PID: 10, State: localenv.StateRunning, StartedAt: started, Started: true, Ready: true}),
			corev1.PodRunning, true, "running", "", 0, -1},
		{"back-off after a kill", view(&localenv.ReplicaStatus{State: localenv.StateWaiting, Reason: "CrashLoopBackOff", RestartCount: 1, LastTerminated: lastTerm}),
			corev1.PodRunning, false, "waiting", "CrashLoopBackOff", 1, 137},
		{"restarted", view(&localenv.ReplicaStatus{PID: 11, State: localenv.StateRunning, StartedAt: started, Started: true, Ready: true, RestartCount: 2, LastTerminated: lastTerm}),
			corev1.PodRunning, true, "running", "", 2, 137},
		{"stopped", func() podView {
			v := view(&localenv.ReplicaStatus{State: localenv.StateTerminated, LastTerminated: &localenv.Termination{Reason: "Completed", FinishedAt: t0}})
			v.stopped = true
			return v
		}(), corev1.PodRunning, false, "terminated", "Completed", 0, -1},
		{"job pod completed", view(&localenv.ReplicaStatus{State: localenv.StateTerminated, Finished: true,
			LastTerminated: &localenv.Termination{Reason: "Completed", StartedAt: t0, FinishedAt: t0.Add(time.Second)}}),
			corev1.PodSucceeded, false, "terminated", "Completed", 0, -1},
		{"job pod failed", view(&localenv.ReplicaStatus{State: localenv.StateTerminated, Finished: true,
			LastTerminated: &localenv.Termination{ExitCode: 137, Signal: 9, Reason: "Error", StartedAt: t0, FinishedAt: t0.Add(time.Second)}}),
			corev1.PodFailed, false, "terminated", "Error", 0, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := podStatus(corev1.PodStatus{}, tc.view, t0.Add(time.Minute))
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			if st.PodIP != "192.0.2.9" || len(st.PodIPs) != 1 || st.HostIP != "192.0.2.1" {
				t.Errorf("addresses podIP %s podIPs %v hostIP %s", st.PodIP, st.PodIPs, st.HostIP)
			}
			if !st.StartTime.Time.Equal(t0) {
				t.Errorf("startTime %v, want %v", st.StartTime, t0)
			}
			want := corev1.ConditionFalse
			if tc.ready {
				want = corev1.ConditionTrue
			}
			for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				if c := condition(st, ct); c.Status != want {
					t.Errorf("%s %s, want %s", ct, c.Status, want)
				}
			}
			for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized} {
				if c := condition(st, ct); c.Status != corev1.ConditionTrue {
					t.Errorf("%s %s, want True", ct, c.Status)
				}
			}
			if len(st.ContainerStatuses) != 1 {
				t.Fatalf("%d container statuses", len(st.ContainerStatuses))
			}
			cs := st.ContainerStatuses[0]
			if cs.Name != "app" || cs.Ready != tc.ready || cs.RestartCount != tc.restarts || cs.Started == nil {
				t.Errorf("container status %+v", cs)
			}
			switch tc.state {
			case "running":
				if cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(started) {
					t.Errorf("state %+v, want running since %v", cs.State, started)
				}
			case "waiting":
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != tc.reason {
					t.Errorf("state %+v, want waiting %s", cs.State, tc.reason)
				}
			case "terminated":
				if cs.State.Terminated == nil || cs.State.Terminated.Reason != tc.reason {
					t.Errorf("state %+v, want terminated %s", cs.State, tc.reason)
				}
			}
			if tc.lastExitCode < 0 {
				if cs.LastTerminationState.Terminated != nil {
					t.Errorf("lastState %+v, want none", cs.LastTerminationState)
				}
			} else if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != tc.lastExitCode || lt.Reason != "Error" || lt.Signal != 9 {
				t.Errorf("lastState.terminated %+v, want exit code %d reason Error", lt, tc.lastExitCode)
			}
		})
	}
}

// A condition whose status did not change keeps its lastTransitionTime, so
// an unchanged view gives an equal status (no write); a change stamps now.
func TestPodStatusTransitionTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &localenv.ReplicaStatus{PID: 10, State: localenv.StateRunning, StartedAt: t0, Started: true, Ready: true}
	v := podView{podIP: "192.0.2.9", hostIP: "192.0.2.1", container: "app", startTime: t0, replica: r}
	first := podStatus(corev1.PodStatus{}, v, t0.Add(time.Second))
	again := podStatus(first, v, t0.Add(time.Hour))
	if !statusEqual(first, again) {
		t.Fatalf("an unchanged view gives a different status:\n%+v\n%+v", first, again)
	}
	r2 := *r
	r2.Ready = false
	v.replica = &r2
	later := t0.Add(2 * time.Hour)
	changed := podStatus(first, v, later)
	if statusEqual(first, changed) {
		t.Fatal("readiness change gives an equal status")
	}
	if got := condition(changed, corev1.PodReady).LastTransitionTime; !got.Time.Equal(later) {
		t.Errorf("Ready lastTransitionTime %v, want %v", got, later)
	}
	if got := condition(changed, corev1.PodScheduled).LastTransitionTime; !got.Equal(&metav1.Time{Time: t0.Add(time.Second)}) {
		t.Errorf("PodScheduled lastTransitionTime %v moved", got)
	}
}
