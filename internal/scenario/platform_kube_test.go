package scenario

import (
	"strings"
	"testing"
)

const platformScenario = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata: {name: p}
environment:
%ENV%
timeline: {duration: 60s}
services:
%SERVICE%
streams:
  - name: s
    targets: [{url: "${services.api.url}/"}]
    rate: 1/s
faults:
%FAULT%
`

const (
	kubeEnv      = "  type: kubernetes\n  kubernetes: {allowedContexts: [c], namespace: n}"
	kubeService  = "  - {name: api, selector: app=api, url: \"http://127.0.0.1:18080\"}"
	localEnv     = "  type: local"
	localService = "  - {name: api, command: [\"x\"], replicas: 3}"
)

// TestPlatformFaultsByEnvironment: pod-kill and rollout validate in local
// and kubernetes environments; evict is kubernetes-only, named pods in
// kubernetes mode need only the <service>-<i> form, and errors name the
// file, the line and the key.
func TestPlatformFaultsByEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, env, service, fault string
		want                      []string
	}{
		{name: "kube pod-kill by count", env: kubeEnv, service: kubeService,
			fault: "  - {name: k, type: pod-kill, service: api, count: 2, signal: SIGKILL, at: 10s, for: 10s}"},
		{name: "kube pod-kill evicting named pods", env: kubeEnv, service: kubeService,
			fault: "  - {name: k, type: pod-kill, service: api, pods: [api-0, api-7], evict: true, at: 10s, for: 10s}"},
		{name: "kube pod-kill of a badly named pod", env: kubeEnv, service: kubeService,
			fault: "  - {name: k, type: pod-kill, service: api, pods: [web-0], at: 10s, for: 10s}",
			want:  []string{"p.yaml:", "faults[0].pods", `no pod "web-0"`, "api-<i>"}},
		{name: "kube rollout with the Deployment's strategy", env: kubeEnv, service: kubeService,
			fault: "  - {name: r, type: rollout, service: api, at: 10s, for: 40s}"},
		{name: "kube rollout with bounds", env: kubeEnv, service: kubeService,
			fault: "  - {name: r, type: rollout, service: api, maxSurge: 1, maxUnavailable: 0, at: 10s, for: 40s}"},
		{name: "kube rollout stalled", env: kubeEnv, service: kubeService,
			fault: "  - {name: r, type: rollout, service: api, maxSurge: 0, maxUnavailable: 0%, at: 10s, for: 40s}",
			want:  []string{"faults[0]", "both 0"}},
		{name: "evict locally", env: localEnv, service: localService,
			fault: "  - {name: k, type: pod-kill, service: api, evict: true, at: 10s, for: 10s}",
			want:  []string{"p.yaml:", "faults[0].evict", "applies only in a kubernetes environment"}},
		{name: "evict on a rollout", env: kubeEnv, service: kubeService,
			fault: "  - {name: r, type: rollout, service: api, evict: true, at: 10s, for: 40s}",
			want:  []string{"faults[0].evict", "evict does not apply to a rollout fault"}},
		{name: "kube drain of a pod's node", env: kubeEnv, service: kubeService,
			fault: "  - {name: d, type: drain, service: api, pods: [api-1], at: 10s, for: 20s}"},
		{name: "kube drain of a named node", env: kubeEnv, service: kubeService,
			fault: "  - {name: d, type: drain, service: api, node: worker-2, at: 10s, for: 20s}"},
		{name: "kube drain of two pods' nodes", env: kubeEnv, service: kubeService,
			fault: "  - {name: d, type: drain, service: api, pods: [api-0, api-1], at: 10s, for: 20s}",
			want:  []string{"faults[0].pods", "one pod; 2 are named"}},
		{name: "kube drain by node and pod", env: kubeEnv, service: kubeService,
			fault: "  - {name: d, type: drain, service: api, node: n, pods: [api-0], at: 10s, for: 20s}",
			want:  []string{"faults[0]: a drain names its node by node or by the pod in pods, not both"}},
		{name: "drain locally", env: localEnv, service: localService,
			fault: "  - {name: d, type: drain, service: api, at: 10s, for: 20s}",
			want:  []string{"p.yaml:", "faults[0].type", "drain applies only in a kubernetes environment"}},
		{name: "node on a pod-kill", env: kubeEnv, service: kubeService,
			fault: "  - {name: k, type: pod-kill, service: api, node: n, at: 10s, for: 10s}",
			want:  []string{"faults[0].node", "node does not apply to a pod-kill fault"}},
		{name: "local rollout defaults still checked", env: localEnv, service: "  - {name: api, command: [\"x\"], replicas: 1}",
			fault: "  - {name: r, type: rollout, service: api, maxSurge: 0, at: 10s, for: 40s}",
			want:  []string{"both come to 0 pods of the 1 replicas"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := strings.NewReplacer("%ENV%", c.env, "%SERVICE%", c.service, "%FAULT%", c.fault).Replace(platformScenario)
			_, err := LoadReader("p.yaml", strings.NewReader(src))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want errors %q, got none", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
