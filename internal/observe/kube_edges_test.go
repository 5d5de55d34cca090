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

// TestKubeEdgeCases covers an endpoint in two slices, a slice deleted
// while the watch was down (tombstone), a pod replaced under the same name,
// a pod leaving the selector, and an Event that arrives before its pod.
func TestKubeEdgeCases(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		newPod("p-1", "gw", true, 0),
		newSlice("s1", "gw", epSpec{pod: "p-1"}),
		newSlice("s2", "gw", epSpec{pod: "p-1"}),
	)
	api := installAPIControl(cs)
	ft := &fakeTime{}
	sink := newCollect()
	k := NewKube(cs, event.NewClock(), sink, []KubeTarget{{Service: "gw", Namespace: ns, Selector: "app=gw", EndpointSliceService: "gw"}},
		nil, WithTimeSource(ft.now))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if err := k.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, f func(event.Event) bool) {
		t.Helper()
		sink.waitFor(t, what, func(ev []event.Event) bool { return count(ev, f) > 0 })
	}
	pods, sl := cs.CoreV1().Pods(ns), cs.DiscoveryV1().EndpointSlices(ns)

	// The endpoint leaves one of its two slices: still there, no event.
	ft.set("1s")
	must(sl.Update(ctx, newSlice("s1", "gw"), metav1.UpdateOptions{}))
	// The endpoint terminates: ready false, serving false, terminating true.
	ft.set("2s")
	must(sl.Update(ctx, newSlice("s2", "gw", epSpec{pod: "p-1", serving: ptr(false), terminate: ptr(true), ready: ptr(false)}), metav1.UpdateOptions{}))
	wait("not ready", has(event.EndpointNotReady, "p-1"))
	ft.set("3s")
	if err := sl.Delete(ctx, "s2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("removed", has(event.EndpointRemoved, "p-1"))

	// Same name, new UID: the old pod is gone, a new one is there.
	ft.set("4s")
	p := newPod("p-1", "gw", false, 0)
	p.UID = "uid-p-1-b"
	must(pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	wait("replaced", has(event.PodDeleted, "p-1", func(e event.Event) bool { return e.Reason == "replaced" }))
	// Relabelled out of the selector.
	ft.set("5s")
	p.Labels = map[string]string{"app": "other"}
	must(pods.Update(ctx, p, metav1.UpdateOptions{}))
	wait("left selector", has(event.PodDeleted, "p-1", func(e event.Event) bool { return e.Reason == "left selector" }))

	// An Event about p-2 arrives before p-2 itself.
	ft.set("6s")
	must(cs.CoreV1().Events(ns).Create(ctx, podEvent("p-2.1", "p-2", corev1.EventTypeNormal, "Scheduled", "Successfully assigned drill/p-2"), metav1.CreateOptions{}))
	deadline := time.Now().Add(20 * time.Second)
	for {
		k.mu.Lock()
		n := len(k.unmatched[ns]["p-2"])
		k.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("event of p-2 never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ft.set("7s")
	must(pods.Create(ctx, newPod("p-2", "gw", true, 0), metav1.CreateOptions{}))
	must(sl.Create(ctx, newSlice("s3", "gw", epSpec{pod: "p-2"}), metav1.CreateOptions{}))
	wait("p-2 event", has(event.K8sEvent, "p-2"))
	wait("p-2 endpoint", has(event.EndpointReady, "p-2"))

	// s3 is deleted while the watch is down: a tombstone after the re-list.
	ft.set("8s")
	restore := api.outage()
	if err := sl.Delete(ctx, "s3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	ft.set("9s")
	restore()
	wait("p-2 endpoint removed", has(event.EndpointRemoved, "p-2"))

	checkGolden(t, "kube_edges.golden", sink.snapshot())
}
