package scenario

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const composeScenario = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata: {name: c}
environment:
  type: compose
  compose:
    file: %FILE%
    env:
      DATABASE_URL: postgres://x@${proxies.pg.addr}/x
timeline: {duration: 10s}
proxies:
  - name: pg
    upstream: 127.0.0.1:5432
services:
  - name: %SERVICE%
streams:
  - name: s
    targets: [{url: "${services.%SERVICE%.url}/"}]
    rate: 1/s
`

// traefikCompose is a Compose file running Traefik in front of api, with
// or without allowEmptyServices and without the flag drop.
func traefikCompose(allowEmpty bool, drop string) string {
	flags := []string{"--providers.docker=true", "--entrypoints.web.address=:80", "--api.insecure=true", "--accesslog=true", "--accesslog.format=json"}
	if allowEmpty {
		flags = append(flags, "--providers.docker.allowEmptyServices=true")
	}
	var b strings.Builder
	b.WriteString("services:\n  traefik:\n    image: drill-traefik:v3.6.12\n    command:\n")
	for _, f := range flags {
		if f != drop {
			b.WriteString("      - " + f + "\n")
		}
	}
	b.WriteString(`    ports: ["127.0.0.1::80"]
    volumes: ["/var/run/docker.sock:/var/run/docker.sock:ro"]
  api:
    image: x
    labels:
      traefik.enable: "true"
      traefik.http.routers.api.rule: PathPrefix(` + "`/`" + `)
      traefik.http.services.api.loadbalancer.server.port: "8080"
`)
	return b.String()
}

// TestComposeEnvironment validates compose environments against their
// Compose files: drill's subset, Traefik labels, scenario services naming
// Compose services, and the keys that do not apply.
func TestComposeEnvironment(t *testing.T) {
	tests := []struct {
		name, compose, service, extra string
		want                          []string
	}{
		{name: "ok", service: "api", compose: `services:
  api:
    image: x
    ports: ["127.0.0.1::8080"]
    environment: {DB: "${DATABASE_URL}"}
    labels:
      traefik.http.routers.api.rule: PathPrefix(` + "`/`" + `)
      traefik.http.services.api.loadbalancer.server.port: "8080"
`},
		{name: "unsupported key", service: "api", compose: "services:\n  api:\n    image: x\n    network_mode: host\n",
			want: []string{"environment.compose.file", "compose.yaml:4: services.api.network_mode", "not supported by drill"}},
		{name: "no port and no Traefik", service: "api", compose: "services:\n  api:\n    image: x\n",
			want: []string{"services[0].name: api publishes no port and the Compose file runs no Traefik"}},
		{name: "Traefik", service: "api", compose: traefikCompose(true, ""), extra: "traefik"},
		{name: "Traefik, allowEmptyServices agrees", service: "api", compose: traefikCompose(true, ""), extra: "traefik+allow"},
		{name: "Traefik, allowEmptyServices disagrees", service: "api", compose: traefikCompose(false, ""), extra: "traefik+allow",
			want: []string{"environment.compose.allowEmptyServices: true disagrees with services.traefik.command (--providers.docker.allowEmptyServices is false)"}},
		{name: "Traefik without its access log", service: "api", compose: traefikCompose(true, "--accesslog.format=json"), extra: "traefik",
			want: []string{"services.traefik.command: drill reads every request from Traefik's access log"}},
		{name: "Traefik without its API", service: "api", compose: traefikCompose(true, "--api.insecure=true"), extra: "traefik",
			want: []string{"set --api.insecure=true"}},
		{name: "Traefik entry point not published", service: "api", compose: strings.Replace(traefikCompose(true, ""), `ports: ["127.0.0.1::80"]`, `ports: ["127.0.0.1::8080"]`, 1), extra: "traefik",
			want: []string{"services.traefik.ports: publish entry point web's port 80 on loopback"}},
		{name: "Traefik not named", service: "api", compose: traefikCompose(true, ""),
			want: []string{"service traefik mounts the engine's socket", "set environment.compose.traefik.service"}},
		{name: "allowEmptyServices without Traefik", service: "api", compose: "services:\n  api:\n    image: x\n    ports: [\"127.0.0.1::80\"]\n", extra: "allow",
			want: []string{"environment.compose.allowEmptyServices: applies only with environment.compose.traefik"}},
		{name: "unknown service", service: "web", compose: "services:\n  api:\n    image: x\n",
			want: []string{`services[0].name: no service "web"`, "it has api"}},
		{name: "traefik label outside the subset", service: "api", compose: `services:
  api:
    image: x
    labels:
      traefik.http.routers.api.rule: PathPrefix(` + "`/`" + `)
      traefik.http.routers.api.middlewares: auth
      traefik.http.services.api.loadbalancer.server.port: "8080"
`, want: []string{"traefik.http.routers.api.middlewares", "not supported by drill"}},
		{name: "container-pause of a Compose service", service: "api", compose: "services:\n  api:\n    image: x\n    ports: [\"127.0.0.1::80\"]\n  db:\n    image: y\n",
			extra: "faults:\n  - {name: freeze, type: container-pause, dependency: db, at: 2s, for: 2s}\n"},
		{name: "container-pause of no Compose service", service: "api", compose: "services:\n  api:\n    image: x\n",
			extra: "faults:\n  - {name: freeze, type: container-pause, dependency: db, at: 2s, for: 2s}\n",
			want:  []string{`faults[0].dependency: no dependency named "db"`}},
		{name: "pod-kill and rollout of a Compose service on a fixed port", service: "api",
			compose: "services:\n  api:\n    image: x\n    ports: [\"127.0.0.1:18080:80\"]\n    stop_grace_period: 3s\n",
			extra: "faults:\n  - {name: kill, type: pod-kill, service: api, pods: [api-0], signal: SIGKILL, at: 2s, for: 2s}\n" +
				"  - {name: roll, type: rollout, service: api, at: 5s, for: 4s}\n"},
		{name: "pod-kill of a Compose service behind Traefik", service: "api", compose: traefikCompose(true, ""),
			extra: "traefik+faults:\n  - {name: kill, type: pod-kill, service: api, percent: 100, seed: 3, at: 2s, for: 2s}\n"},
		{name: "pod-kill of a Compose service on a port the engine picks", service: "api", compose: "services:\n  api:\n    image: x\n    ports: [\"127.0.0.1::80\"]\n",
			extra: "faults:\n  - {name: kill, type: pod-kill, service: api, at: 2s, for: 2s}\n",
			want:  []string{"faults[0].service: a pod-kill of api starts its container again, and the engine publishes it on a new host port it picks"}},
		{name: "local keys refused", service: "api", compose: "services:\n  api:\n    image: x\n",
			extra: "    replicas: 2\n", want: []string{"services[0].replicas: replicas does not apply to a compose service"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(tt.compose), 0o644); err != nil {
				t.Fatal(err)
			}
			sc := strings.ReplaceAll(strings.ReplaceAll(composeScenario, "%FILE%", "compose.yaml"), "%SERVICE%", tt.service)
			if t, f, ok := strings.Cut(tt.extra, "+faults:"); ok {
				sc += "faults:" + f
				tt.extra = t
			}
			switch {
			case strings.HasPrefix(tt.extra, "traefik") || tt.extra == "allow":
				var keys string
				if strings.HasPrefix(tt.extra, "traefik") {
					keys += "    traefik: {service: traefik}\n"
				}
				if strings.HasSuffix(tt.extra, "allow") {
					keys += "    allowEmptyServices: true\n"
				}
				sc = strings.Replace(sc, "    env:\n", keys+"    env:\n", 1)
			case strings.HasPrefix(tt.extra, "faults:"):
				sc += tt.extra
			case tt.extra != "":
				sc = strings.Replace(sc, "  - name: "+tt.service+"\n", "  - name: "+tt.service+"\n"+tt.extra, 1)
			}
			path := filepath.Join(dir, "s.yaml")
			if err := os.WriteFile(path, []byte(sc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want errors %q, got none", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestComposeEnvRedacted: environment.compose.env is a service's
// environment by another road (the Compose file's ${VAR} reads it), so a
// sensitive variable's value is a secret: run.json's scenario, plan
// output and free text (logs, healthcheck outputs, errors) lose it.
func TestComposeEnvRedacted(t *testing.T) {
	const canary = "CANARY-c0mp05e"
	src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata: {name: c}
environment:
  type: compose
  compose:
    file: compose.yaml
    env:
      API_TOKEN: ` + canary + `
      TENANT_SEAL: ` + canary + `
      LOG_LEVEL: info
redact: {allowEnv: [LOG_LEVEL]}
timeline: {duration: 10s}
services:
  - name: api
streams:
  - name: s
    targets: [{url: "${services.api.url}/"}]
    rate: 1/s
`
	s, err := Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Redactor()
	b, err := json.Marshal(s.Redacted(r))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(canary)) {
		t.Errorf("redacted scenario holds environment.compose.env's secret: %s", b)
	}
	if !bytes.Contains(b, []byte(`"LOG_LEVEL":"info"`)) {
		t.Errorf("redacted scenario lost an ordinary variable: %s", b)
	}
	if got := r.Text("healthcheck output: token " + canary); strings.Contains(got, canary) {
		t.Errorf("Text kept environment.compose.env's secret: %q", got)
	}
	if s.Environment.Compose.Env["API_TOKEN"] != canary {
		t.Error("Redacted changed the scenario it was given")
	}
}
