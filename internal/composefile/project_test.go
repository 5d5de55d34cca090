package composefile

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
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
		"unsupported.yaml:4: services.api.network_mode",
		"unsupported.yaml:8: services.api.healthcheck.frobnicate",
		"unsupported.yaml:9: volumes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestLoadPortsAndBinds: ports publish on loopback only, and the one bind
// mount is the engine's socket.
func TestLoadPortsAndBinds(t *testing.T) {
	tests := []struct {
		name, svc string
		want      string // error substring; "" for valid
	}{
		{"loopback, engine picks the port", "    ports: [\"127.0.0.1::80\"]\n", ""},
		{"loopback, fixed port", "    ports: [\"127.0.0.1:18080:80\"]\n", ""},
		{"all addresses", "    ports: [\"8080:80\"]\n", `services.api.ports[0]: host address "" not supported by drill`},
		{"udp", "    ports: [\"127.0.0.1::53/udp\"]\n", "protocol udp not supported by drill"},
		{"docker socket", "    volumes: [\"/var/run/docker.sock:/var/run/docker.sock:ro\"]\n", ""},
		{"other bind", "    volumes: [\"/etc:/host-etc\"]\n", "services.api.volumes[0]: /etc:/host-etc not supported by drill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "compose.yaml")
			if err := os.WriteFile(path, []byte("services:\n  api:\n    image: x\n"+tt.svc), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Load(context.Background(), path, "p", nil)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, _ := p.Service("api")
			switch {
			case strings.Contains(tt.svc, "ports"):
				if len(s.Ports) != 1 || s.Ports[0].HostIP != "127.0.0.1" || s.Ports[0].Target != 80 {
					t.Errorf("ports %+v", s.Ports)
				}
				if fixed := strings.Contains(tt.svc, "18080"); fixed != (s.Ports[0].HostPort == 18080) || !fixed && s.Ports[0].HostPort != 0 {
					t.Errorf("host port %d", s.Ports[0].HostPort)
				}
			default:
				if len(s.Binds) != 1 || s.Binds[0] != (Bind{Source: DockerSocket, Target: DockerSocket, ReadOnly: true}) {
					t.Errorf("binds %+v", s.Binds)
				}
			}
		})
	}
}

// TestParseTraefikStatic reads the flags drill needs of a Traefik command.
func TestParseTraefikStatic(t *testing.T) {
	tests := []struct {
		name string
		cmd  []string
		want TraefikStatic
		err  string
	}{
		{name: "ADR 0077 correct", cmd: []string{"--providers.docker=true", "--providers.docker.allowEmptyServices=true",
			"--entrypoints.web.address=:80", "--api.insecure=true", "--accesslog=true", "--accesslog.format=json"},
			want: TraefikStatic{EntryPoints: map[string]int{"web": 80}, APIPort: 8080, DockerProvider: true, AllowEmptyServices: true, AccessLogJSON: true}},
		{name: "case and bare flags", cmd: []string{"--providers.docker", "--ENTRYPOINTS.web.ADDRESS=:8000", "--entrypoints.traefik.address=:9000",
			"--api.insecure", "--accessLog.format=JSON"},
			want: TraefikStatic{EntryPoints: map[string]int{"web": 8000, "traefik": 9000}, APIPort: 9000, DockerProvider: true, AccessLogJSON: true}},
		{name: "access log to a file", cmd: []string{"--accesslog.format=json", "--accesslog.filepath=/log/access.log"},
			want: TraefikStatic{EntryPoints: map[string]int{}}},
		{name: "buffered access log", cmd: []string{"--accesslog.format=json", "--accesslog.bufferingsize=100"},
			want: TraefikStatic{EntryPoints: map[string]int{}}},
		{name: "common log format", cmd: []string{"--accesslog=true"}, want: TraefikStatic{EntryPoints: map[string]int{}}},
		{name: "bad bool", cmd: []string{"--providers.docker.allowEmptyServices=maybe"}, err: "--providers.docker.allowemptyservices=maybe is not true or false"},
		{name: "bad address", cmd: []string{"--entrypoints.web.address=web"}, err: "--entrypoints.web.address=web: want [host]:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTraefikStatic(Service{Name: "traefik", Command: tt.cmd})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v\nwant %+v", *got, tt.want)
			}
		})
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

// TestLoadStopGrace: stop_grace_period is the container's stop timeout,
// a whole number of seconds (the Engine API's unit); unset is the
// engine's 10 s.
func TestLoadStopGrace(t *testing.T) {
	for _, tt := range []struct {
		value string // "" leaves the key out
		grace time.Duration
		want  string
	}{
		{value: "", grace: DefaultStopGrace},
		{value: "30s", grace: 30 * time.Second},
		{value: "1m", grace: time.Minute},
		{value: "1500ms", want: "services.api.stop_grace_period: 1.5s not supported by drill: the engine's stop timeout is a whole number of seconds"},
	} {
		yml := "services:\n  api:\n    image: x\n"
		if tt.value != "" {
			yml += "    stop_grace_period: " + tt.value + "\n"
		}
		path := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Load(context.Background(), path, "p", nil)
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q: err %v, want %q", tt.value, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.value, err)
		}
		if g := p.Services[0].Grace(); g != tt.grace {
			t.Errorf("%q: grace %s, want %s", tt.value, g, tt.grace)
		}
	}
}
