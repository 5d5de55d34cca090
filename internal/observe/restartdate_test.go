package observe

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/drillhq/drill/internal/event"
)

// TestKubeCrashDatedByExit: a container that crashed (no probe killed it)
// and waits out its CrashLoopBackOff is restarted by the kubelet only when
// the back-off ends, when its restartCount rises; the restart is dated by
// the moment the observer first saw the container ended (t=5 s), not by
// the rise (t=25 s), and a status re-sent while it waits does not move
// that date.
func TestKubeCrashDatedByExit(t *testing.T) {
	ctx := context.Background()
	running := func(restarts int32) *corev1.Pod {
		p := newPod("gw-a", "order-gateway", true, restarts)
		p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
		return p
	}
	crashed := func(restarts int32) *corev1.Pod {
		p := newPod("gw-a", "order-gateway", false, restarts)
		cs := &p.Status.ContainerStatuses[0]
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
		return p
	}
	cs := fake.NewClientset(running(1))
	ft := &fakeTime{}
	ft.set("-1s")
	sink := newCollect()
	k := NewKube(cs, event.NewClock(), sink,
		[]KubeTarget{{Service: "order-gateway", Namespace: ns, Selector: "app=order-gateway"}},
		nil, WithTimeSource(ft.now))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := k.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	sink.waitFor(t, "initial state", func(ev []event.Event) bool { return count(ev, has(event.PodReady, "gw-a")) == 1 })

	pods := cs.CoreV1().Pods(ns)
	update := func(at string, p *corev1.Pod, what string, want func([]event.Event) bool) {
		t.Helper()
		ft.set(at)
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		sink.waitFor(t, what, want)
	}
	update("5s", crashed(1), "gw-a unready", func(ev []event.Event) bool { return count(ev, has(event.PodUnready, "gw-a")) == 1 })
	// The kubelet re-sends the status while the back-off runs.
	p := crashed(1)
	p.Status.ContainerStatuses[0].State.Waiting.Message = "back-off 20s restarting failed container"
	ft.set("10s")
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	again := running(2)
	again.Status.ContainerStatuses[0].LastTerminationState = p.Status.ContainerStatuses[0].LastTerminationState
	update("25s", again, "the restart", func(ev []event.Event) bool { return count(ev, has(event.ContainerRestart, "gw-a")) == 1 })

	got := sink.snapshot()
	r := got[indexOf(got, has(event.ContainerRestart, "gw-a"))]
	if r.At != 5*time.Second || r.RestartCount != 2 || r.Probe != "" || r.Reason != "Error" {
		t.Errorf("restart %s: want at 5s (the exit first seen), restartCount 2, no probe, reason Error", fmtEvent(r))
	}
	if s := got[indexOf(got, func(e event.Event) bool { return has(event.PodReady, "gw-a")(e) && e.At > 0 })]; s.At != 25*time.Second {
		t.Errorf("ready again at %s, want 25s", s.At)
	}
}
