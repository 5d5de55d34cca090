package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestLoadProcessStats: drill load --process-stats writes drill's own CPU
// and allocations over the load with the requests sent.
func TestLoadProcessStats(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	rate, err := scenario.ParseRate("50/s")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "stats.json")
	err = Load(context.Background(), LoadOptions{ProcessStats: file, ProgressEvery: -1, Streams: []scenario.Stream{{
		Name: "s", Targets: []scenario.Target{{URL: srv.URL + "/"}}, Rate: &rate,
		Duration: scenario.Duration{Duration: time.Second}, Timeout: scenario.Duration{Duration: time.Second},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var st ProcessStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 50 || st.Self.CPU <= 0 || st.Self.AllocObjects == 0 || st.Self.AllocBytes == 0 || st.Span < 500*time.Millisecond {
		t.Fatalf("stats %+v: want 50 requests, CPU and allocations, a span near the 1 s of load (its last hit is due at 0.98 s)", st)
	}
}
