package scenario

import (
	"strings"
	"testing"
	"time"
)

// TestServiceSetupAndPort: setup, port and includeStartup decode, setup's
// timeout defaults to 5m, and the port variable may be renamed (PORT is
// then the service's own to set).
func TestServiceSetupAndPort(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal+`services:
  - name: app
    command: [sh, -c, "exec ./app --listen $$LISTEN_ADDR"]
    replicas: 2
    port: {env: LISTEN_ADDR, format: "host:port"}
    env:
      PORT: "9999"
    setup:
      command: [./bin/migrate, up]
      env:
        DSN: ${dependencies.pg.dsn}
assertions:
  - type: restarts
    service: app
    max: 0
    includeStartup: false
`)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	svc := s.Services[0]
	if svc.Port == nil || svc.Port.Env != "LISTEN_ADDR" || svc.Port.Format != PortFormatHostPort {
		t.Errorf("port %+v", svc.Port)
	}
	if st := svc.Setup; st == nil || st.Timeout.D() != 5*time.Minute || strings.Join(st.Command, " ") != "./bin/migrate up" ||
		st.Env["DSN"] != "${dependencies.pg.dsn}" {
		t.Errorf("setup %+v", svc.Setup)
	}
	if a := s.Assertions[0]; a.IncludeStartup == nil || *a.IncludeStartup {
		t.Errorf("includeStartup %v, want false as written", a.IncludeStartup)
	}
}

// TestServicePortAndSetupLocalOnly: port and setup apply only to local
// services.
func TestServicePortAndSetupLocalOnly(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: t
environment:
  type: kubernetes
  kubernetes:
    allowedContexts: [kind-drill]
    namespace: shop
timeline:
  duration: 30s
services:
  - name: app
    selector: app=app
    url: http://app.shop:8080
    port: {env: PORT}
    setup:
      command: [./migrate]
`)
	err := s.Validate()
	for _, want := range []string{"services[0].port: port applies only to environment type local",
		"services[0].setup: setup applies only to environment type local"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}
