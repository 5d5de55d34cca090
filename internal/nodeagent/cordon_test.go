package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestCordoned: the agent binds no pod to its node while the node is
// unschedulable, as the scheduler binds none there, except a pod that
// tolerates the unschedulable taint (a DaemonSet's).
func TestCordoned(t *testing.T) {
	t.Parallel()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if err := idx.Add(node); err != nil {
		t.Fatal(err)
	}
	a := &Agent{nodeLister: corelisters.NewNodeLister(idx)}
	a.cfg.Node = "n1"
	plain := &corev1.Pod{}
	tolerant := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	tolerateAll := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	otherTaint := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpExists}}}}
	if a.cordoned(plain) {
		t.Error("a schedulable node holds a pod back")
	}
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	if err := idx.Update(cordoned); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{{"plain pod", plain, true}, {"tolerates unschedulable", tolerant, false}, {"tolerates everything", tolerateAll, false}, {"tolerates another taint", otherTaint, true}} {
		if got := a.cordoned(c.pod); got != c.want {
			t.Errorf("%s on a cordoned node: held back %t, want %t", c.name, got, c.want)
		}
	}
}

// TestSelects: the agent binds a pod without a node selector, or with one
// its Node's labels satisfy, and leaves a pod meant for another node (a
// real kubelet's on the same control plane) to the scheduler.
func TestSelects(t *testing.T) {
	t.Parallel()
	a := &Agent{}
	a.cfg.Node = "drill-node"
	for _, c := range []struct {
		name     string
		selector map[string]string
		want     bool
	}{
		{"no selector", nil, true},
		{"its own hostname", map[string]string{"kubernetes.io/hostname": "drill-node"}, true},
		{"the agent label", map[string]string{"drill.dev/node-agent": "true"}, true},
		{"another node's hostname", map[string]string{"kubernetes.io/hostname": "drill-kubelet"}, false},
		{"a label it lacks", map[string]string{"disk": "ssd"}, false},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: c.selector}}
		if got := a.selects(pod); got != c.want {
			t.Errorf("%s: selects %t, want %t", c.name, got, c.want)
		}
	}
}
