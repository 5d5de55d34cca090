package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

const kubeNS = "drill"

// kubePod is a running pod of app=api created at second sec.
func kubePod(name string, sec int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kubeNS, UID: types.UID("uid-" + name),
		Labels:            map[string]string{"app": "api"},
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// kubeHarness is a fake cluster with three pods of service api (created in
// the order api-c, api-a, api-b, so that creation order and name order
// differ), the env of a kubernetes run, its journal and its events.
type kubeHarness struct {
	cs      *fake.Clientset
	env     *Env
	journal *Journal
	mu      sync.Mutex
	events  []event.Event
	// deleted lists, in order, "delete <pod> grace=<g>" and "evict <pod>".
	deleted []string
	// journaledFirst is false once an API call ended a pod before the
	// journal held the fault.
	journaledFirst bool
}

func newKubeHarness(t *testing.T, objs ...runtime.Object) *kubeHarness {
	t.Helper()
	objs = append(objs, kubePod("api-c", 1), kubePod("api-a", 2), kubePod("api-b", 3),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: kubeNS, UID: "uid-other", Labels: map[string]string{"app": "other"}}})
	h := &kubeHarness{cs: fake.NewClientset(objs...), journaledFirst: true}
	j, err := OpenJournal(t.TempDir(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	h.journal = j
	h.env = &Env{RunID: "r1", Journal: j, Kube: &KubeEnv{
		Client: h.cs, Namespace: kubeNS, Selectors: map[string]string{"api": "app=api"}, Context: "ctx",
		Events: event.SinkFunc(func(e event.Event) { h.mu.Lock(); h.events = append(h.events, e); h.mu.Unlock() }),
		Poll:   5 * time.Millisecond,
	}}
	// Every delete and eviction: check the journal, then record it. Deletes
	// fall through to the tracker (the pod is gone at once); evictions
	// delete the pod here, as the API server does.
	h.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		g := "default"
		if gp := d.GetDeleteOptions().GracePeriodSeconds; gp != nil {
			g = fmt.Sprint(*gp)
		}
		h.record(t, "delete "+d.GetName()+" grace="+g)
		return false, nil, nil
	})
	// A patch of a Deployment's spec bumps its generation in the same
	// write, as the API server does (the fake's tracker does not).
	h.cs.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ok, obj, err := k8stesting.ObjectReaction(h.cs.Tracker())(a)
		if err != nil || !ok {
			return ok, obj, err
		}
		d := obj.(*appsv1.Deployment)
		d.Generation++
		gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		return true, d, h.cs.Tracker().Update(gvr, d, d.Namespace)
	})
	return h
}

func (h *kubeHarness) record(t *testing.T, what string) {
	entries, err := ReadJournal(h.journal.Path())
	if err != nil || len(Pending(entries)) == 0 {
		h.journaledFirst = false
	}
	h.mu.Lock()
	h.deleted = append(h.deleted, what)
	h.mu.Unlock()
}

func (h *kubeHarness) reasons() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		out = append(out, e.Reason+" "+e.Pod)
	}
	return out
}

func podKillFault(mod func(f *scenario.Fault)) scenario.Fault {
	f := scenario.Fault{Name: "kill", Type: scenario.FaultPodKill, Service: "api", At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}
	if mod != nil {
		mod(&f)
	}
	return f
}

// TestKubePodKill: the pods are chosen among the live pods of the selector
// (by creation time for named pods, with the seed otherwise), journaled
// before any is deleted, deleted with their grace period or grace 0, and
// the Revert returns once they are gone and closes the journal entry.
func TestKubePodKill(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		mod  func(f *scenario.Fault)
		want []string
	}{
		{name: "named pods by creation time, grace period",
			mod:  func(f *scenario.Fault) { f.Pods = []string{"api-0", "api-2"} },
			want: []string{"delete api-c grace=default", "delete api-b grace=default"}},
		{name: "SIGKILL is grace 0",
			mod:  func(f *scenario.Fault) { f.Pods = []string{"api-1"}; f.Signal = scenario.SignalKill },
			want: []string{"delete api-a grace=0"}},
		{name: "count with a seed",
			mod: func(f *scenario.Fault) { f.Count = ptr(2); f.Seed = ptr(int64(7)) },
			want: func() []string {
				var out []string
				for _, p := range ChoosePods([]string{"api-c", "api-a", "api-b"}, 2, 7) {
					out = append(out, "delete "+p+" grace=default")
				}
				return out
			}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newKubeHarness(t)
			inj, err := Build(podKillFault(c.mod), h.env)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := inj.(*kubePodKill); !ok {
				t.Fatalf("Build gave %T for a kubernetes service, want *kubePodKill", inj)
			}
			revert, err := inj.Inject(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(h.deleted, c.want) {
				t.Errorf("API calls %q, want %q", h.deleted, c.want)
			}
			if !h.journaledFirst {
				t.Error("a pod was deleted before the journal held the fault")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := revert(ctx); err != nil {
				t.Fatalf("revert: %v", err)
			}
			entries, _ := ReadJournal(h.journal.Path())
			if p := Pending(entries); len(p) != 0 {
				t.Errorf("journal entries left open: %+v", p)
			}
			if entries[0].Kind != KindKubePods || entries[0].Namespace != kubeNS || len(entries[0].PodUIDs) != len(c.want) {
				t.Errorf("journal entry %+v", entries[0])
			}
			for _, r := range h.reasons() {
				if !strings.HasPrefix(r, ReasonKilling+" ") {
					t.Errorf("event %q, want Killing", r)
				}
			}
			if d := inj.(Describer).Describe(); !strings.Contains(d, "namespace drill") {
				t.Errorf("Describe = %q", d)
			}
		})
	}
}

// TestKubePodKillRevertWaits: the Revert does not return while a deleted
// pod is still in the API (terminating in its grace period), and returns
// once it is gone.
func TestKubePodKillRevertWaits(t *testing.T) {
	t.Parallel()
	h := newKubeHarness(t)
	// Deletes mark the pod terminating instead of removing it.
	h.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	inj, err := Build(podKillFault(func(f *scenario.Fault) { f.Pods = []string{"api-0"} }), h.env)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err = revert(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "api-c") {
		t.Fatalf("revert while the pod is in the API: %v, want an error naming api-c", err)
	}
	if err := h.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kubeNS, "api-c"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := revert(ctx); err != nil {
		t.Fatalf("revert once gone: %v", err)
	}
}

// TestKubePodKillEvict: evict: true goes through the eviction API with the
// pod's UID; a refusal (429, a PodDisruptionBudget) is an EvictionRefused
// event, not an error, and the pod is not waited for.
func TestKubePodKillEvict(t *testing.T) {
	t.Parallel()
	h := newKubeHarness(t)
	h.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string })
		name := ev.GetName()
		h.record(t, "evict "+name)
		if name == "api-a" {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return true, nil, h.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kubeNS, name)
	})
	inj, err := Build(podKillFault(func(f *scenario.Fault) { f.Pods = []string{"api-0", "api-1"}; f.Evict = ptr(true) }), h.env)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatalf("a refused eviction must not fail the fault: %v", err)
	}
	if want := []string{"evict api-c", "evict api-a"}; !slices.Equal(h.deleted, want) {
		t.Errorf("API calls %q, want %q", h.deleted, want)
	}
	if got, want := h.reasons(), []string{ReasonEvicted + " api-c", ReasonEvictionRefused + " api-a"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := revert(ctx); err != nil {
		t.Fatalf("revert: %v (the refused pod stays and is not waited for)", err)
	}
	if _, err := h.cs.CoreV1().Pods(kubeNS).Get(ctx, "api-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the refused pod: %v", err)
	}
}

// TestKubePodKillNoSuchPod: a named pod beyond the live pods is an error
// naming them, before anything is journaled or deleted.
func TestKubePodKillNoSuchPod(t *testing.T) {
	t.Parallel()
	h := newKubeHarness(t)
	inj, err := Build(podKillFault(func(f *scenario.Fault) { f.Pods = []string{"api-3"} }), h.env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = inj.Inject(context.Background())
	if err == nil || !strings.Contains(err.Error(), "api-c, api-a, api-b") {
		t.Fatalf("Inject = %v, want an error listing the live pods by creation time", err)
	}
	if len(h.deleted) != 0 {
		t.Errorf("deleted %q", h.deleted)
	}
	entries, _ := ReadJournal(h.journal.Path())
	if len(entries) != 0 {
		t.Errorf("journaled %+v", entries)
	}
}

func deployment(strategy appsv1.DeploymentStrategy) *appsv1.Deployment {
	three := int32(3)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: kubeNS, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Strategy: strategy,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
}

func rollingStrategy(surge, unav string) appsv1.DeploymentStrategy {
	s, u := intstr.Parse(surge), intstr.Parse(unav)
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
}

// controllerSteps plays the Deployment controller: it waits for the
// restart's generation, then moves the status through a rolling update of
// 3 replicas with maxSurge 1 and maxUnavailable 0.
func controllerSteps(t *testing.T, cs kubernetes.Interface, done chan<- struct{}) {
	defer close(done)
	ctx := context.Background()
	var d *appsv1.Deployment
	for {
		var err error
		d, err = cs.AppsV1().Deployments(kubeNS).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		if d.Spec.Template.Annotations[RestartedAtAnnotation] != "" {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	// (observed, replicas, updated, available)
	for _, s := range [][4]int32{{2, 4, 1, 3}, {2, 4, 2, 3}, {2, 3, 2, 3}, {2, 4, 3, 3}, {2, 3, 3, 3}} {
		time.Sleep(20 * time.Millisecond)
		d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = int64(s[0]), s[1], s[2], s[3]
		var err error
		if d, err = cs.AppsV1().Deployments(kubeNS).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
			return
		}
	}
}

// TestKubeRollout: the restart is the patch of `kubectl rollout restart`;
// the strategy's bounds are written only when the fault sets them and put
// back when it ends; the rollout is followed to completion as `kubectl
// rollout status` reads it, with a RolloutStep event per move and a
// RolloutComplete at the end, and the Revert returns only then.
func TestKubeRollout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		before       appsv1.DeploymentStrategy
		surge, unav  *scenario.IntOrPercent
		wantDuring   string // maxSurge/maxUnavailable while rolling
		wantJournal  bool
		wantStrategy appsv1.DeploymentStrategy
	}{
		{name: "the Deployment's own strategy", before: rollingStrategy("25%", "25%"),
			wantDuring: "25%/25%", wantStrategy: rollingStrategy("25%", "25%")},
		{name: "bounds set by the fault", before: rollingStrategy("25%", "25%"),
			surge: &scenario.IntOrPercent{N: 1}, unav: &scenario.IntOrPercent{N: 0},
			wantDuring: "1/0", wantJournal: true, wantStrategy: rollingStrategy("25%", "25%")},
		{name: "a Recreate Deployment comes back Recreate", before: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			surge:      &scenario.IntOrPercent{N: 50, Percent: true},
			wantDuring: "50%/<nil>", wantJournal: true, wantStrategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newKubeHarness(t, deployment(c.before))
			f := scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "api", MaxSurge: c.surge, MaxUnavailable: c.unav,
				At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}
			inj, err := Build(f, h.env)
			if err != nil {
				t.Fatal(err)
			}
			ctrl := make(chan struct{})
			go controllerSteps(t, h.cs, ctrl)
			revert, err := inj.Inject(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			d, _ := h.cs.AppsV1().Deployments(kubeNS).Get(context.Background(), "api", metav1.GetOptions{})
			if _, err := time.Parse(time.RFC3339, d.Spec.Template.Annotations[RestartedAtAnnotation]); err != nil {
				t.Errorf("restartedAt annotation: %v", err)
			}
			if ru := d.Spec.Strategy.RollingUpdate; ru == nil {
				t.Errorf("strategy while rolling %+v", d.Spec.Strategy)
			} else if got := fmt.Sprintf("%v/%v", strOrNil(ru.MaxSurge), strOrNil(ru.MaxUnavailable)); got != c.wantDuring {
				t.Errorf("strategy while rolling %s, want %s", got, c.wantDuring)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := revert(ctx); err != nil {
				t.Fatalf("revert: %v", err)
			}
			<-ctrl
			d, _ = h.cs.AppsV1().Deployments(kubeNS).Get(ctx, "api", metav1.GetOptions{})
			got, _ := json.Marshal(d.Spec.Strategy)
			want, _ := json.Marshal(c.wantStrategy)
			if string(got) != string(want) {
				t.Errorf("strategy after the fault %s, want %s", got, want)
			}
			// (Putting the strategy back is a spec change of its own: a
			// new generation, but no new rollout.)
			if st := d.Status; st.ObservedGeneration != 2 || st.UpdatedReplicas != 3 || st.Replicas != 3 || st.AvailableReplicas != 3 {
				t.Errorf("the revert returned before the rollout completed: status %+v", st)
			}
			rs := h.reasons()
			if len(rs) < 3 || rs[len(rs)-1] != ReasonRolloutDone+" " {
				t.Errorf("events %q: want RolloutStep ... RolloutComplete", rs)
			}
			var updated []string
			for _, e := range h.events {
				// Before the controller observed the restart, the status is
				// the old rollout's.
				if e.Reason == ReasonRolloutStep && e.Labels["step"] == "status" && e.Labels["observedGeneration"] == "2" {
					updated = append(updated, e.Labels["updated"])
				}
			}
			if !slices.IsSorted(updated) || updated[len(updated)-1] != "3" {
				t.Errorf("updatedReplicas over the RolloutStep events %v: want rising to 3", updated)
			}
			entries, _ := ReadJournal(h.journal.Path())
			if entries[0].Kind != KindKubeDeployment || (entries[0].Strategy != "") != c.wantJournal {
				t.Errorf("journal entry %+v", entries[0])
			}
			if p := Pending(entries); len(p) != 0 {
				t.Errorf("journal entries left open: %+v", p)
			}
		})
	}
}

func strOrNil(v *intstr.IntOrString) string {
	if v == nil {
		return "<nil>"
	}
	return v.String()
}

// TestKubeRolloutPaused: a paused Deployment is refused before anything
// is journaled or patched.
func TestKubeRolloutPaused(t *testing.T) {
	t.Parallel()
	d := deployment(rollingStrategy("25%", "25%"))
	d.Spec.Paused = true
	h := newKubeHarness(t, d)
	inj, err := Build(scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "api",
		At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}, h.env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inj.Inject(context.Background()); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("Inject = %v, want a paused error", err)
	}
	for _, a := range h.cs.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("patched a paused Deployment: %v", a)
		}
	}
}

// TestKubeRolloutStatus pins the reading of `kubectl rollout status`.
func TestKubeRolloutStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                       string
		gen, observed              int64
		replicas, updated, avail   int32
		progressDeadline, wantDone bool
		wantMsg                    string
	}{
		{name: "not observed", gen: 2, observed: 1, replicas: 3, updated: 3, avail: 3, wantMsg: "spec update"},
		{name: "updating", gen: 2, observed: 2, replicas: 4, updated: 1, avail: 3, wantMsg: "1 out of 3 new replicas"},
		{name: "old left", gen: 2, observed: 2, replicas: 4, updated: 3, avail: 3, wantMsg: "1 old replicas"},
		{name: "not available", gen: 2, observed: 2, replicas: 3, updated: 3, avail: 2, wantMsg: "2 of 3 updated"},
		{name: "done", gen: 2, observed: 2, replicas: 3, updated: 3, avail: 3, wantDone: true, wantMsg: "successfully rolled out"},
		{name: "deadline", gen: 2, observed: 2, replicas: 4, updated: 1, avail: 3, progressDeadline: true},
	} {
		d := deployment(rollingStrategy("1", "0"))
		d.Generation = c.gen
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: c.observed, Replicas: c.replicas, UpdatedReplicas: c.updated, AvailableReplicas: c.avail}
		if c.progressDeadline {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
		}
		done, msg, err := RolloutStatus(d)
		switch {
		case c.progressDeadline:
			if err == nil {
				t.Errorf("%s: no error", c.name)
			}
		case err != nil || done != c.wantDone || !strings.Contains(msg, c.wantMsg):
			t.Errorf("%s: %t %q %v, want %t %q", c.name, done, msg, err, c.wantDone, c.wantMsg)
		}
	}
}

// TestCleanupKubeDeployment: drill cleanup puts back the strategy a killed
// run wrote into a Deployment, and says a restart cannot be undone; a
// pod-kill's entry has nothing to undo.
func TestCleanupKubeDeployment(t *testing.T) {
	t.Parallel()
	d := deployment(rollingStrategy("1", "0")) // as the killed run left it
	cs := fake.NewClientset(d)
	dir := t.TempDir()
	j, err := OpenJournal(dir, "r2")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(rollingStrategy("25%", "25%"))
	for _, e := range []Entry{
		{Op: OpApply, Key: "kube-pods/api/kill", Kind: KindKubePods, Fault: "kill", Service: "api", Namespace: kubeNS, Pods: []string{"api-c"}},
		{Op: OpApply, Key: "kube-deployment/api/roll", Kind: KindKubeDeployment, Fault: "roll", Service: "api", Namespace: kubeNS,
			Deployment: "api", Context: "ctx", Kubeconfig: "/k", Strategy: string(before)},
	} {
		if err := j.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	_ = j.Close()
	var asked []string
	rep, err := Cleanup(context.Background(), CleanupOptions{StateDir: dir, RunID: "r2",
		NewKube: func(kubeconfig, context, namespace string) (kubernetes.Interface, error) {
			asked = append(asked, kubeconfig+" "+context+" "+namespace)
			return cs, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/k ctx drill"}; !slices.Equal(asked, want) {
		t.Errorf("connected to %q, want %q", asked, want)
	}
	got, _ := cs.AppsV1().Deployments(kubeNS).Get(context.Background(), "api", metav1.GetOptions{})
	if b, _ := json.Marshal(got.Spec.Strategy); string(b) != string(before) {
		t.Errorf("strategy after cleanup %s, want %s", b, before)
	}
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].String(), "cannot be undone") {
		t.Errorf("removed %v", rep.Removed)
	}
	if len(rep.Gone) != 1 || !strings.Contains(rep.Gone[0].String(), "ReplicaSet replaces them") {
		t.Errorf("gone %v", rep.Gone)
	}
	entries, _ := ReadJournal(JournalPath(dir, "r2"))
	if p := Pending(entries); len(p) != 0 {
		t.Errorf("left open: %+v", p)
	}
}

// TestKubeDrain: the node of the named pod is journaled, cordoned, its
// drainable pods of the namespace are evicted (DaemonSet and mirror pods
// and pods of other nodes are not), and the Revert uncordons it after the
// evicted pods are gone; cleanup after a killed run uncordons too.
func TestKubeDrain(t *testing.T) {
	t.Parallel()
	onNode := func(p *corev1.Pod, node string) *corev1.Pod { p.Spec.NodeName = node; return p }
	ds := onNode(kubePod("ds-x", 4), "n1")
	ds.Labels = nil
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: ptr(true), APIVersion: "apps/v1"}}
	mirror := onNode(kubePod("static-x", 5), "n1")
	mirror.Labels = nil
	mirror.Annotations = map[string]string{MirrorPodAnnotation: "x"}
	h := newKubeHarness(t,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		ds, mirror)
	for name, node := range map[string]string{"api-c": "n2", "api-a": "n1", "api-b": "n1"} {
		p, _ := h.cs.CoreV1().Pods(kubeNS).Get(context.Background(), name, metav1.GetOptions{})
		p.Spec.NodeName = node
		if _, err := h.cs.CoreV1().Pods(kubeNS).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var cordonedWhenEvicting []bool
	h.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		n, _ := h.cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "n1")
		cordonedWhenEvicting = append(cordonedWhenEvicting, n.(*corev1.Node).Spec.Unschedulable)
		name := a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string }).GetName()
		h.record(t, "evict "+name)
		return true, nil, h.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kubeNS, name)
	})
	// api-1 by creation time is api-a, on n1.
	inj, err := Build(scenario.Fault{Name: "drain", Type: scenario.FaultDrain, Service: "api", Pods: []string{"api-1"},
		At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}, h.env)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(h.deleted)
	if want := []string{"evict api-a", "evict api-b"}; !slices.Equal(h.deleted, want) {
		t.Errorf("evicted %q, want %q", h.deleted, want)
	}
	if !h.journaledFirst || !slices.Equal(cordonedWhenEvicting, []bool{true, true}) {
		t.Errorf("journaled first %t, node cordoned at each eviction %v", h.journaledFirst, cordonedWhenEvicting)
	}
	entries, _ := ReadJournal(h.journal.Path())
	if len(entries) != 1 || entries[0].Kind != KindKubeNode || entries[0].Node != "n1" || entries[0].WasCordoned {
		t.Fatalf("journal %+v", entries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := revert(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := h.cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if n.Spec.Unschedulable {
		t.Error("node n1 still cordoned after the drain")
	}
	got := h.reasons()
	if got[0] != ReasonCordon+" " || got[len(got)-1] != ReasonUncordon+" " {
		t.Errorf("events %q: want cordon first, uncordon last", got)
	}

	// A run killed mid-drain: cleanup uncordons.
	if err := setUnschedulable(ctx, h.cs, "n2", true); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j, _ := OpenJournal(dir, "r3")
	_ = j.Record(Entry{Op: OpApply, Key: "kube-node/drain", Kind: KindKubeNode, Fault: "drain", Service: "api", Namespace: kubeNS, Node: "n2"})
	_ = j.Close()
	rep, err := Cleanup(ctx, CleanupOptions{StateDir: dir, RunID: "r3",
		NewKube: func(string, string, string) (kubernetes.Interface, error) { return h.cs, nil }})
	if err != nil || len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].String(), "uncordoned node n2") {
		t.Fatalf("cleanup: %v %v", rep.Removed, err)
	}
	if n, _ := h.cs.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{}); n.Spec.Unschedulable {
		t.Error("cleanup left node n2 cordoned")
	}
}
