package composefile

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	p, err := Load(context.Background(), "testdata/ok.yaml", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "shop" {
		t.Errorf("project name %q, want shop (the file's name key)", p.Name)
	}
	if len(p.Services) != 2 || p.Services[0].Name != "db" || p.Services[1].Name != "api" {
		t.Fatalf("services in dependency order: got %+v", p.Services)
	}
	api := p.Services[1]
	if api.Image != "shop-api" || api.Build == nil || !filepath.IsAbs(api.Build.Context) || api.Build.Dockerfile != "Dockerfile" {
		t.Errorf("api build: image %q build %+v", api.Image, api.Build)
	}
	if api.CPUs != 0.5 {
		t.Errorf("api cpus %v, want 0.5", api.CPUs)
	}
	if api.Restart != "unless-stopped" || api.DependsOn["db"] != "service_healthy" {
		t.Errorf("api restart %q depends_on %v", api.Restart, api.DependsOn)
	}
	if strings.Join(api.Env, ",") != "DB=db:5432" {
		t.Errorf("api env %v", api.Env)
	}
	h := p.Services[0].Health
	if h == nil || h.Interval != 2*time.Second || h.Timeout != time.Second || h.Retries != 3 || h.StartPeriod != 5*time.Second {
		t.Errorf("db health %+v", h)
	}
	named, err := Load(context.Background(), "testdata/ok.yaml", "drill-x", nil)
	if err != nil || named.Name != "drill-x" {
		t.Errorf("project override: %v %v", named, err)
	}
}

func TestLoadRefusesUnsupported(t *testing.T) {
	_, err := Load(context.Background(), "testdata/unsupported.yaml", "p", nil)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{
		"unsupported.yaml:4: services.api.ports",
		"unsupported.yaml:8: services.api.healthcheck.frobnicate",
		"unsupported.yaml:9: volumes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseRoutes(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		wantErr string
		routers int
	}{
		{"path prefix", map[string]string{
			"traefik.http.routers.r.rule":                      "PathPrefix(`/a`)",
			"traefik.http.services.s.loadbalancer.server.port": "80"}, "", 1},
		{"disabled", map[string]string{"traefik.enable": "false",
			"traefik.http.routers.r.rule": "Foo(`x`)"}, "", 0},
		{"unknown matcher", map[string]string{
			"traefik.http.routers.r.rule":                      "HostRegexp(`x`)",
			"traefik.http.services.s.loadbalancer.server.port": "80"}, "matcher HostRegexp", 0},
		{"middleware refused", map[string]string{
			"traefik.http.routers.r.rule":                      "Path(`/`)",
			"traefik.http.routers.r.middlewares":               "auth",
			"traefik.http.services.s.loadbalancer.server.port": "80"}, "traefik.http.routers.r.middlewares", 0},
		{"no port", map[string]string{"traefik.http.routers.r.rule": "Path(`/`)"}, "server.port is required", 0},
		{"service nobody defines", map[string]string{
			"traefik.http.routers.r.rule":                      "Path(`/`)",
			"traefik.http.routers.r.service":                   "nope",
			"traefik.http.services.s.loadbalancer.server.port": "80"}, `traefik.http.routers.r.service: no container defines the Traefik service "nope"`, 0},
		{"bad rule", map[string]string{"traefik.http.routers.r.rule": "Path(`/`",
			"traefik.http.services.s.loadbalancer.server.port": "80"}, "missing )", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseRoutes(&Project{Services: []Service{{Name: "svc", Labels: tt.labels}}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Routers) != tt.routers {
				t.Fatalf("routers %d, want %d", len(rs.Routers), tt.routers)
			}
		})
	}
}

func TestRuleMatching(t *testing.T) {
	tests := []struct {
		rule, url string
		want      bool
	}{
		{"PathPrefix(`/orders`)", "http://x/orders/1", true},
		{"PathPrefix(`/orders`)", "http://x/other", false},
		{"Path(`/orders`)", "http://x/orders/1", false},
		{"Path(`/orders`)", "http://x/orders", true},
		{"Host(`api.localhost`)", "http://API.localhost:8080/", true},
		{"Host(`api.localhost`) && PathPrefix(`/a`)", "http://api.localhost/b", false},
		{"Host(`x`) || (Host(`api.localhost`) && PathPrefix(`/a`))", "http://api.localhost/a", true},
		{"Host(`a`, `b`)", "http://b/", true},
	}
	for _, tt := range tests {
		m, err := parseRule(tt.rule)
		if err != nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		if got := m(httptest.NewRequest("GET", tt.url, nil)); got != tt.want {
			t.Errorf("%s on %s = %v, want %v", tt.rule, tt.url, got, tt.want)
		}
	}
}

// TestLoadRefusesRestart: a restart value the engine has no policy for is
// refused when the file is read (drill validate), not when the container
// is created mid-run.
func TestLoadRefusesRestart(t *testing.T) {
	for _, tt := range []struct{ restart, want string }{
		{"sometimes", `services.api.restart: restart "sometimes": not supported by drill`},
		{"on-failure:x", `services.api.restart: restart "on-failure:x": the retry count is not a number`},
		{"always:3", `services.api.restart: restart "always:3": not supported by drill`},
		{"on-failure:3", ""},
	} {
		path := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(path, []byte("services:\n  api:\n    image: x\n    restart: \""+tt.restart+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Load(context.Background(), path, "p", nil)
		if tt.want == "" {
			if err != nil || p.Services[0].Restart != tt.restart {
				t.Errorf("%q: %v, %v", tt.restart, p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err %v, want %q", tt.restart, err, tt.want)
		}
	}
}

// TestParseRoutesAcrossContainers: a router may name a Traefik service
// another container defines, as with Traefik's Docker provider.
func TestParseRoutesAcrossContainers(t *testing.T) {
	rs, err := ParseRoutes(&Project{Services: []Service{
		{Name: "edge", Labels: map[string]string{
			"traefik.http.routers.r.rule":    "Path(`/`)",
			"traefik.http.routers.r.service": "api",
			// the container's own service, so the port requirement holds
			"traefik.http.services.edge.loadbalancer.server.port": "81"}},
		{Name: "api", Labels: map[string]string{"traefik.http.services.api.loadbalancer.server.port": "80"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Routers) != 1 || rs.Routers[0].Service != "api" || len(rs.Backends) != 2 {
		t.Errorf("routes %+v", rs)
	}
}
