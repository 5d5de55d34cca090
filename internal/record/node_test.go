package record

import "testing"

// TestNodeLine: the one-line description of a node names its kubelet and
// runtime, drill's agent, or why it could not be read.
func TestNodeLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		n    Node
		want string
	}{
		{"kubelet", Node{Name: "drill-kubelet", Kind: NodeKubelet, KubeletVersion: "v1.37.2", ContainerRuntime: "containerd://1.6.20~ds1", Pods: 3},
			"drill-kubelet: kubelet v1.37.2, containerd://1.6.20~ds1 (3 pods)"},
		{"agent", Node{Name: "drill-node", Kind: NodeAgent, KubeletVersion: "drill-agent", ContainerRuntime: "drill://local-processes", Pods: 1},
			"drill-node: drill agent (1 pods)"},
		{"unreadable", Node{Name: "n1", Pods: 2, Error: `nodes "n1" is forbidden`},
			`n1: unknown (nodes "n1" is forbidden) (2 pods)`},
	} {
		if got := c.n.Line(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
