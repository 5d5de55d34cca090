package nodeagent

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drillhq/drill/internal/localenv"
)

// podView is what the agent knows about one pod it runs, the input of
// podStatus.
type podView struct {
	podIP, hostIP string
	container     string
	image         string
	// startTime is when the agent accepted the pod (status.startTime).
	startTime time.Time
	// replica is the container's latest status; nil while the pod could not
	// be started (then waitingReason/waitingMessage say why).
	replica        *localenv.ReplicaStatus
	waitingReason  string
	waitingMessage string
	// stopped: the agent is shutting down and the process is gone.
	stopped bool
}

// podStatus computes the status the kubelet would write for v, keeping the
// lastTransitionTime of every condition whose status did not change in old.
// now stamps the conditions that changed.
func podStatus(old corev1.PodStatus, v podView, now time.Time) corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:     corev1.PodPending,
		HostIP:    v.hostIP,
		HostIPs:   []corev1.HostIP{{IP: v.hostIP}},
		PodIP:     v.podIP,
		PodIPs:    []corev1.PodIP{{IP: v.podIP}},
		StartTime: &metav1.Time{Time: v.startTime.UTC().Truncate(time.Second)},
		QOSClass:  old.QOSClass,
	}
	if old.StartTime != nil {
		st.StartTime = old.StartTime
	}
	cs := corev1.ContainerStatus{Name: v.container, Image: v.image, ImageID: "drill://local"}
	ready, started := false, false
	switch r := v.replica; {
	case r == nil:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: v.waitingReason, Message: v.waitingMessage}
	default:
		cs.RestartCount = r.RestartCount
		if t := r.LastTerminated; t != nil {
			cs.LastTerminationState.Terminated = terminated(t)
		}
		switch {
		case v.stopped || r.State == localenv.StateTerminated:
			if t := r.LastTerminated; t != nil {
				cs.State.Terminated = terminated(t)
				cs.LastTerminationState = corev1.ContainerState{}
			} else {
				cs.State.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}
			}
		case r.PID != 0:
			// Running, or terminating (the kubelet reports running until the
			// process is gone).
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: r.StartedAt.UTC().Truncate(time.Second)}}
			cs.ContainerID = fmt.Sprintf("drill://%d", r.PID)
			ready, started = r.Ready, r.Started
		default:
			reason, msg := r.Reason, ""
			if reason == "" || reason == "ContainerCreating" {
				reason = "ContainerCreating"
			}
			if reason == "CrashLoopBackOff" {
				msg = fmt.Sprintf("back-off restarting failed container %s (restart %d)", v.container, r.RestartCount)
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
		}
		if r.RestartCount > 0 || r.PID != 0 || r.LastTerminated != nil {
			st.Phase = corev1.PodRunning
		}
		// A container its restartPolicy does not restart ends the pod, as
		// the kubelet's getPhase says for one container: Succeeded on exit
		// code 0, else Failed. Terminal for good: the API refuses a phase
		// going back.
		if r.Finished {
			st.Phase = corev1.PodSucceeded
			if t := r.LastTerminated; t == nil || t.ExitCode != 0 {
				st.Phase = corev1.PodFailed
			}
		}
	}
	cs.Ready = ready
	cs.Started = &started
	st.ContainerStatuses = []corev1.ContainerStatus{cs}

	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Time{Time: now.UTC()}}
		if ok {
			c.Status = corev1.ConditionTrue
		} else {
			c.Reason = reason
		}
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
				c.LastProbeTime = o.LastProbeTime
			}
		}
		return c
	}
	finished := v.replica != nil && v.replica.Finished
	running := v.replica != nil && !v.stopped && !finished
	notReady := "ContainersNotReady"
	if v.stopped || finished {
		notReady = "PodCompleted"
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, running, ""),
		cond(corev1.PodInitialized, true, ""),
		cond(corev1.PodReady, ready, notReady),
		cond(corev1.ContainersReady, ready, notReady),
		cond(corev1.PodScheduled, true, ""),
	}
	return st
}

func terminated(t *localenv.Termination) *corev1.ContainerStateTerminated {
	out := &corev1.ContainerStateTerminated{
		ExitCode:   t.ExitCode,
		Signal:     t.Signal,
		Reason:     t.Reason,
		Message:    t.Message,
		FinishedAt: metav1.Time{Time: t.FinishedAt.UTC().Truncate(time.Second)},
	}
	if !t.StartedAt.IsZero() {
		out.StartedAt = metav1.Time{Time: t.StartedAt.UTC().Truncate(time.Second)}
	}
	return out
}

// statusEqual reports whether two statuses say the same (timestamps in
// conditions included, so a changed condition always differs).
func statusEqual(a, b corev1.PodStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
