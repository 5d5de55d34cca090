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
