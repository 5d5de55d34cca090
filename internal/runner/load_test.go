package runner

import (
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestLoadStreamsExpand: drill load fills the references drill run fills
// before it starts anything (${run.id}, ${env.NAME}, a kubernetes
// service's ${services.NAME.url}) and refuses, naming the field, one only
// drill run can fill.
func TestLoadStreamsExpand(t *testing.T) {
	stream := scenario.Stream{Name: "orders", Targets: []scenario.Target{{
		URL: "${services.api.url}/orders", Headers: map[string]string{"Authorization": "Bearer ${env.DRILL_TEST_TOKEN}"}, Body: "${run.id}",
	}}}
	lookup := func(k string) (string, bool) {
		if k == "DRILL_TEST_TOKEN" {
			return "tok", true
		}
		return "", false
	}
	kube := &scenario.Scenario{File: "k.yaml", Environment: scenario.Environment{Type: scenario.EnvKubernetes},
		Services: []scenario.Service{{Name: "api", URL: "http://api.staging:8080"}}, Streams: []scenario.Stream{stream}}
	vars, secrets := startVars(kube, "load-1", lookup)
	if len(secrets) != 1 || secrets[0] != "tok" {
		t.Errorf("secrets %q, want the env value", secrets)
	}
	got, err := scenarioStreams(kube, vars)
	if err != nil {
		t.Fatal(err)
	}
	if tg := got[0].Targets[0]; tg.URL != "http://api.staging:8080/orders" || tg.Headers["Authorization"] != "Bearer tok" || tg.Body != "load-1" {
		t.Errorf("expanded target %+v", tg)
	}

	local := &scenario.Scenario{File: "l.yaml", Services: []scenario.Service{{Name: "api"}}, Streams: []scenario.Stream{stream}}
	vars, _ = startVars(local, "load-1", lookup)
	_, err = scenarioStreams(local, vars)
	if err == nil || !strings.Contains(err.Error(), "l.yaml: streams[0].targets[0].url: ") || !strings.Contains(err.Error(), "drill load cannot start the scenario's services or proxies") {
		t.Errorf("local service reference: err %v", err)
	}
}
