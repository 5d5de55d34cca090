package runner

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/drillhq/drill/internal/nodeagent"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

// TestTargetNodes: run.json's nodes are those that run the target
// services' pods, a kubelet's with its versions, the agent's as such, one
// that cannot be read with its error; pods of other selectors and
// namespaces, and unscheduled pods, count for nothing.
func TestTargetNodes(t *testing.T) {
	t.Parallel()
	pod := func(ns, name, app, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	kubelet := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{
		KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "containerd://1.6.20~ds1", OSImage: "Debian GNU/Linux 12", KernelVersion: "6.18.0"}}}
	agent := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{
		KubeletVersion: nodeagent.KubeletVersion, ContainerRuntimeVersion: "drill://local-processes"}}}
	cs := fake.NewClientset(kubelet, agent,
		pod("drill", "gw-1", "gw", "k"), pod("drill", "gw-2", "gw", "k"), pod("drill", "gw-3", "gw", "a"),
		pod("drill", "pay-1", "pay", "gone"), pod("drill", "pending", "gw", ""),
		pod("drill", "other", "other", "k"), pod("elsewhere", "gw-x", "gw", "k"))
	got := targetNodes(context.Background(), cs, "drill", []scenario.Service{
		{Name: "gw", Selector: "app=gw"}, {Name: "pay", Selector: "app=pay"}, {Name: "local"}})
	want := []record.Node{
		{Name: "a", Kind: record.NodeAgent, KubeletVersion: nodeagent.KubeletVersion, ContainerRuntime: "drill://local-processes", Pods: 1},
		{Name: "gone", Pods: 1, Error: `nodes "gone" not found`},
		{Name: "k", Kind: record.NodeKubelet, KubeletVersion: "v1.37.2", ContainerRuntime: "containerd://1.6.20~ds1",
			OSImage: "Debian GNU/Linux 12", KernelVersion: "6.18.0", Pods: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes:\n got  %+v\n want %+v", got, want)
	}
}
