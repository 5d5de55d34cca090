package localenv

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

func TestPodName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		slot, gen int
		want      string
	}{
		{0, 0, "api-0"},
		{2, 0, "api-2"},
		{1, 1, "api-1-r1"},
		{0, 3, "api-0-r3"},
	} {
		if got := PodName("api", c.slot, c.gen); got != c.want {
			t.Errorf("PodName(api, %d, %d) = %q, want %q", c.slot, c.gen, got, c.want)
		}
	}
}

// TestDeletePodReplaces deletes a replica with the grace period: its
// endpoint turns terminating (serving while its readiness holds) before
// its process gets SIGTERM, a replacement starts in the same slot (same
// $REPLICA_INDEX, a new pod name) and only becomes an endpoint when its
// readiness passes; the deleted pod leaves the Service once reaped.
func TestDeletePodReplaces(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 2,
		Env:    map[string]string{"TERM_LINGER": "1500ms"},
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 1, 1)}})
	h.waitReady(2)
	repl, err := h.svc.DeletePod("api-1", DeleteOptions{Reason: "fault kill"}, "kill")
	if err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if repl != "api-1-r1" {
		t.Errorf("replacement = %q, want api-1-r1", repl)
	}
	if _, err := h.svc.DeletePod("api-1", DeleteOptions{}, "kill"); err == nil || !strings.Contains(err.Error(), "live: api-0, api-1-r1") {
		t.Errorf("second DeletePod of api-1: %v, want no such live pod listing api-0, api-1-r1", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.WaitGone(ctx, "api-1"); err != nil {
		t.Fatal(err)
	}
	h.waitReady(2)
	h.waitEvents("ready endpoint of the replacement", 1, isKind(event.EndpointReady, "api-1-r1"))
	if got := h.getEnv("api-1-r1", "REPLICA_INDEX"); got != "1" {
		t.Errorf("replacement's REPLICA_INDEX = %q, want 1", got)
	}
	if got := h.svc.LivePods(); !slices.Equal(got, []string{"api-0", "api-1-r1"}) {
		t.Errorf("LivePods = %v", got)
	}
	// The old pod's story, in order: Killing, its endpoint terminating
	// but serving (it lingers and still answers /ready), the process
	// gone, then the pod.
	var seq []string
	for _, e := range h.podEvents("api-1") {
		switch {
		case e.Kind == event.K8sEvent && e.Reason == "Killing":
			seq = append(seq, "killing")
		case e.Kind == event.EndpointNotReady && e.Detail == "ready=false serving=true terminating=true":
			seq = append(seq, "terminating-serving")
		case e.Kind == event.EndpointRemoved:
			seq = append(seq, "endpoint-removed")
		case e.Kind == event.PodDeleted:
			if e.Fault != "kill" || !strings.Contains(e.Reason, "fault kill") {
				t.Errorf("PodDeleted = %+v, want fault kill and reason", e)
			}
			seq = append(seq, "deleted")
		}
	}
	want := []string{"killing", "terminating-serving", "endpoint-removed", "deleted"}
	if !slices.Equal(compact(seq), want) {
		t.Errorf("api-1's events %v, want %v; events:\n%s", seq, want, h.dump())
	}
	created := h.waitEvents("PodCreated", 1, isKind(event.PodCreated, "api-1-r1"))
	if created[0].Reason != "replaces api-1" {
		t.Errorf("PodCreated reason %q", created[0].Reason)
	}
}

func compact(s []string) []string { return slices.Compact(slices.Clone(s)) }

// TestDeletePodKill: SIGKILL ends the process at once, whatever its
// SIGTERM handling.
func TestDeletePodKill(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 1, Grace: 30 * time.Second,
		Env: map[string]string{"IGNORE_TERM": "1"}})
	h.waitReady(1)
	start := time.Now()
	if _, err := h.svc.DeletePod("api-0", DeleteOptions{Kill: true, Reason: "kill"}, "k"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.WaitGone(ctx, "api-0"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("SIGKILL took %s (the 30s grace was waited for?)", took)
	}
	del := h.waitEvents("PodDeleted", 1, isKind(event.PodDeleted, "api-0"))
	if !strings.Contains(del[0].Detail, "SIGKILL") {
		t.Errorf("PodDeleted detail %q, want the SIGKILL exit", del[0].Detail)
	}
	h.waitReady(1)
}

// TestRolloutStepOrder rolls three real replicas with maxSurge 1 and
// maxUnavailable 0 (the Deployment defaults for three replicas): each old
// pod is deleted only after a new one is ready, there are never more than
// four live pods nor fewer than three ready ones, the old pods' endpoints
// turn terminating before they are removed, and the rollout ends with
// three new ready pods, one per slot.
func TestRolloutStepOrder(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 3,
		Env:    map[string]string{"TERM_LINGER": "300ms"},
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 1, 1)}})
	h.waitReady(3)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.Rollout(ctx, RolloutOptions{MaxSurge: 1, MaxUnavailable: 0, Fault: "roll"}); err != nil {
		t.Fatalf("Rollout: %v\nevents:\n%s", err, h.dump())
	}
	if got := h.svc.LivePods(); !slices.Equal(got, []string{"api-0-r1", "api-1-r1", "api-2-r1"}) {
		t.Errorf("LivePods after rollout = %v", got)
	}
	for _, st := range h.svc.Status() {
		if !st.Ready || st.Terminating {
			t.Errorf("after the rollout %s: ready=%t terminating=%t", st.Pod, st.Ready, st.Terminating)
		}
	}
	// Replay the event log: live pods and ready endpoints at each step.
	live := map[string]bool{"api-0": true, "api-1": true, "api-2": true}
	ready := map[string]bool{"api-0": true, "api-1": true, "api-2": true}
	var steps []string
	for _, e := range h.log.Events() {
		switch {
		case e.Kind == event.EndpointReady:
			ready[e.Pod] = true
		case e.Kind == event.EndpointNotReady || e.Kind == event.EndpointRemoved:
			delete(ready, e.Pod)
		case e.Kind == event.K8sEvent && e.Reason == ReasonScaling:
			if e.Fault != "roll" {
				t.Errorf("step event without the fault: %+v", e)
			}
			steps = append(steps, e.Labels["step"]+" "+e.Pod)
			if e.Labels["step"] == "up" {
				live[e.Pod] = true
			} else {
				delete(live, e.Pod)
				// The step is said before the old pod is deleted: it is
				// still ready, and the others keep the declared count.
				if n := len(ready) - 1; n < 3 {
					t.Errorf("deleting %s leaves %d ready endpoints, want >= 3", e.Pod, n)
				}
			}
			if len(live) > 4 {
				t.Errorf("after step %q %d live pods, want <= 4", steps[len(steps)-1], len(live))
			}
		}
	}
	want := []string{"up api-0-r1", "down api-0", "up api-1-r1", "down api-1", "up api-2-r1", "down api-2"}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v; events:\n%s", steps, want, h.dump())
	}
	for _, old := range []string{"api-0", "api-1", "api-2"} {
		var kinds []string
		for _, e := range h.podEvents(old) {
			if e.Kind == event.EndpointNotReady || e.Kind == event.EndpointRemoved {
				kinds = append(kinds, string(e.Kind)+" "+e.Detail)
			}
		}
		if len(kinds) < 2 || !strings.Contains(kinds[0], "terminating=true") || !strings.HasPrefix(kinds[len(kinds)-1], string(event.EndpointRemoved)) {
			t.Errorf("%s endpoint events %q, want terminating then removed", old, kinds)
		}
	}
	h.waitEvents("RolloutComplete", 1, func(e event.Event) bool { return e.Kind == event.Note && e.Reason == ReasonRolloutComplete })
}

func TestRolloutRefusesNoProgress(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 1})
	h.waitReady(1)
	err := h.svc.Rollout(context.Background(), RolloutOptions{})
	if err == nil || !strings.Contains(err.Error(), "one above 0") {
		t.Fatalf("Rollout with both bounds 0: %v", err)
	}
}

// TestDeletePodPreStop: a deleted pod's endpoint turns terminating at
// once, and its process gets SIGTERM only after the preStop sleep.
func TestDeletePodPreStop(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 1, PreStop: 1500 * time.Millisecond, Grace: 5 * time.Second})
	h.waitReady(1)
	if _, err := h.svc.DeletePod("api-0", DeleteOptions{Reason: "test"}, "f"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.WaitGone(ctx, "api-0"); err != nil {
		t.Fatal(err)
	}
	killing := h.waitEvents("Killing", 1, func(e event.Event) bool { return e.Kind == event.K8sEvent && e.Reason == "Killing" && e.Pod == "api-0" })[0]
	term := h.waitEvents("terminating endpoint", 1, func(e event.Event) bool {
		return e.Kind == event.EndpointNotReady && e.Pod == "api-0" && strings.Contains(e.Detail, "terminating=true")
	})[0]
	deleted := h.waitEvents("PodDeleted", 1, isKind(event.PodDeleted, "api-0"))[0]
	if d := term.At - killing.At; d > 500*time.Millisecond {
		t.Errorf("the endpoint turned terminating %s after Killing, want at once", d)
	}
	if d := deleted.At - killing.At; d < 1500*time.Millisecond {
		t.Errorf("the pod was gone %s after Killing, before its 1.5s preStop sleep ended", d)
	}
	if !strings.Contains(deleted.Detail, "exited with code 0") {
		t.Errorf("PodDeleted detail %q: want the SIGTERM exit after the sleep (code 0)", deleted.Detail)
	}
}

// TestRolloutAdoptsReplacements: a pod-kill of the rollout's first new
// pod while the rollout runs; the rollout takes the replacement as the
// slot's new pod and completes with one ready pod per slot and no old
// pod left.
func TestRolloutAdoptsReplacements(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "api", Replicas: 2,
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 1, 2)}})
	h.waitReady(2)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.svc.Rollout(ctx, RolloutOptions{MaxSurge: 1, Fault: "roll"}) }()
	h.waitEvents("the first new pod", 1, isKind(event.PodCreated, "api-0-r1"))
	if _, err := h.svc.DeletePod("api-0-r1", DeleteOptions{Kill: true, Reason: "kill"}, "kill"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Rollout: %v\nevents:\n%s", err, h.dump())
	}
	live := h.svc.LivePods()
	if !slices.Equal(live, []string{"api-0-r2", "api-1-r1"}) {
		t.Errorf("live pods %v, want api-0-r2 (the replacement) and api-1-r1; events:\n%s", live, h.dump())
	}
	for _, st := range h.svc.Status() {
		if !st.Ready || st.Terminating {
			t.Errorf("%s: ready=%t terminating=%t", st.Pod, st.Ready, st.Terminating)
		}
	}
}

// TestDeletePodEndpointLag: with an EndpointLag, a deleted pod's endpoint
// stays routed for the lag although the pod exits at SIGTERM at once (as a
// cluster's proxies still route to a deleted pod until they learn of it),
// and the pod leaves the Service only after it: Killing, then the endpoint
// terminating no earlier than the lag, then removed, then the pod deleted.
func TestDeletePodEndpointLag(t *testing.T) {
	t.Parallel()
	const lag = time.Second
	h := startService(t, ServiceSpec{Name: "api", Replicas: 1, EndpointLag: lag, Grace: 5 * time.Second})
	h.waitReady(1)
	if _, err := h.svc.DeletePod("api-0", DeleteOptions{Reason: "test"}, "f"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := h.svc.WaitGone(ctx, "api-0"); err != nil {
		t.Fatal(err)
	}
	var seq []string
	var killing, term time.Duration
	for _, e := range h.podEvents("api-0") {
		switch {
		case e.Kind == event.K8sEvent && e.Reason == "Killing":
			seq, killing = append(seq, "killing"), e.At
		case e.Kind == event.EndpointNotReady && strings.Contains(e.Detail, "terminating=true"):
			seq, term = append(seq, "terminating"), e.At
		case e.Kind == event.EndpointRemoved:
			seq = append(seq, "endpoint-removed")
		case e.Kind == event.PodDeleted:
			seq = append(seq, "deleted")
		}
	}
	if want := []string{"killing", "terminating", "endpoint-removed", "deleted"}; !slices.Equal(compact(seq), want) {
		t.Fatalf("api-0's events %v, want %v; events:\n%s", seq, want, h.dump())
	}
	if d := term - killing; d < lag-10*time.Millisecond {
		t.Errorf("endpoint turned terminating %s after Killing, before the %s lag", d, lag)
	}
}
