package manifest

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

func i64(v int64) *int64 { return &v }

func TestRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		container string
		want      Container
	}{
		{"deployment api", "order-gateway.yaml", "api", Container{
			Name: "api", Workload: "Deployment/order-gateway", TerminationGracePeriodSeconds: i64(45),
			Probes: scenario.Probes{
				StartupProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/healthz/startup", Port: "http"},
					InitialDelaySeconds: 10, PeriodSeconds: 5, FailureThreshold: 18},
				LivenessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/healthz/live", Port: 8080, Scheme: "HTTP",
					HTTPHeaders: []scenario.HTTPHeader{{Name: "X-Probe", Value: "live"}}},
					PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3, TerminationGracePeriodSeconds: i64(5)},
				ReadinessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/healthz/ready", Port: 8080},
					PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 2, FailureThreshold: 3},
			},
		}},
		{"deployment sidecar", "order-gateway.yaml", "sidecar", Container{
			Name: "sidecar", Workload: "Deployment/order-gateway", TerminationGracePeriodSeconds: i64(45),
			Probes: scenario.Probes{
				ReadinessProbe: &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{Port: 9901}},
				LivenessProbe:  &scenario.Probe{Exec: &scenario.ExecAction{Command: []string{"sh", "-c", "pgrep envoy"}}},
			},
		}},
		{"only container", "single.yaml", "", Container{
			Name: "proxy", Workload: "StatefulSet/db-proxy",
			Probes: scenario.Probes{ReadinessProbe: &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{Port: 5432}}},
		}},
		{"list of pods", "list.yaml", "only", Container{
			Name: "only", Workload: "Pod/one",
			Probes: scenario.Probes{LivenessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/live", Port: 80}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Read(filepath.Join("testdata", tc.file), tc.container)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", show(got), show(tc.want))
			}
			probes, err := Probes(filepath.Join("testdata", tc.file), tc.container)
			if err != nil || !reflect.DeepEqual(probes, tc.want.Probes) {
				t.Errorf("Probes() = %s, %v", show(Container{Probes: probes}), err)
			}
		})
	}
}

func show(c Container) string {
	var b strings.Builder
	b.WriteString(c.Name + " " + c.Workload)
	for _, p := range []*scenario.Probe{c.Probes.StartupProbe, c.Probes.LivenessProbe, c.Probes.ReadinessProbe} {
		if p == nil {
			b.WriteString(" <nil>")
			continue
		}
		b.WriteString(" {")
		if p.HTTPGet != nil {
			b.WriteString("http " + p.HTTPGet.Path)
		}
		b.WriteString("}")
	}
	return b.String()
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		container string
		want      string
	}{
		{"missing file", "nope.yaml", "", "read manifest: open testdata/nope.yaml: no such file or directory"},
		{"no container name, several", "order-gateway.yaml", "",
			"manifest testdata/order-gateway.yaml: 3 containers (api in Deployment/order-gateway, grpc in Deployment/order-gateway, sidecar in Deployment/order-gateway); name the one to use with container"},
		{"unknown container", "order-gateway.yaml", "web",
			`manifest testdata/order-gateway.yaml: no container "web"; containers: api in Deployment/order-gateway, grpc in Deployment/order-gateway, sidecar in Deployment/order-gateway`},
		{"grpc probe", "order-gateway.yaml", "grpc",
			"manifest testdata/order-gateway.yaml: Deployment/order-gateway container grpc: livenessProbe: no httpGet, tcpSocket or exec handler (grpc probes are not supported by the local runtime)"},
		{"misspelt field", "typo.yaml", "web", `manifest testdata/typo.yaml: document 1: parse Deployment: error unmarshaling JSON: while decoding JSON: json: unknown field "livenesProbe"`},
		{"no workload", "no-workload.yaml", "",
			"manifest testdata/no-workload.yaml: no workload with containers (want one of CronJob, DaemonSet, Deployment, Job, Pod, ReplicaSet, StatefulSet; kinds found: Service, ConfigMap)"},
		{"same name twice", "two-deployments.yaml", "app",
			`manifest testdata/two-deployments.yaml: container "app" is in more than one workload (app in Deployment/a, app in Deployment/b); keep one in the file`},
		{"broken yaml", "broken.yaml", "", "manifest testdata/broken.yaml: document 1: parse: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(filepath.Join("testdata", tc.file), tc.container)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n  %s\nwant prefix\n  %s", err, tc.want)
			}
		})
	}
}
