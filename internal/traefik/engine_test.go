package traefik_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/event/eventtest"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/traefikimage"
	"github.com/drillhq/drill/internal/traefik"
)

const composeFile = `name: %s
services:
  traefik:
    image: ` + traefikimage.Image + `
    command:
      - --providers.docker=true
      - --providers.docker.exposedByDefault=false
      - --providers.docker.constraints=Label(` + "`com.docker.compose.project`,`%s`" + `)
%s      - --entrypoints.web.address=:80
      - --api.insecure=true
      - --accesslog=true
      - --accesslog.format=json
    ports: ["127.0.0.1::80"]
    volumes: ["/var/run/docker.sock:/var/run/docker.sock:ro"]
  web:
    image: drill-traefik-test-web:latest
    healthcheck:
      test: ["CMD", "/httpd", "probe", "http://localhost:8080/healthz"]
      interval: 1s
      timeout: 1s
      retries: 2
    labels:
      traefik.enable: "true"
      traefik.http.routers.app.rule: PathPrefix(` + "`/app`" + `)
      traefik.http.services.app.loadbalancer.server.port: "8080"
`

// TestObserverOnRealTraefik runs Traefik (the pinned image) and a test
// service with a healthcheck on the real engine, makes the service
// unhealthy and well again, and checks what the observer reads from
// Traefik itself: the clock offset, the API's view, and the removal and
// return of the route from the access log (404 without
// allowEmptyServices, 503 with it).
func TestObserverOnRealTraefik(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs Traefik and a service on the engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The first build per version takes minutes: not bounded by the
	// test's own timeout above.
	traefikimage.Ensure(t, context.Background(), cli, root)
	bctx := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bctx, "httpd"), "../compose/testdata/httpd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test service: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY httpd /httpd\nENTRYPOINT [\"/httpd\"]\nCMD [\"serve\"]\n"
	if err := os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compose.BuildImage(ctx, cli, bctx, "Dockerfile", "drill-traefik-test-web:latest", nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		allowEmpty bool
		reason     string
		status     int
	}{
		{"without allowEmptyServices", false, "no router", 404},
		// Traefik v3.6.12 keeps a server without a URL for the unhealthy
		// container (its labels set the port) and answers 500 itself,
		// not the 503 of an empty load balancer.
		{"with allowEmptyServices", true, "no server", 500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			project := fmt.Sprintf("traefiktest%t", tt.allowEmpty)
			flag := ""
			if tt.allowEmpty {
				flag = "      - --providers.docker.allowEmptyServices=true\n"
			}
			file := filepath.Join(t.TempDir(), "compose.yaml")
			if err := os.WriteFile(file, []byte(fmt.Sprintf(composeFile, project, project, flag)), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := composefile.Load(ctx, file, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			routes, err := composefile.ParseRoutes(p)
			if err != nil {
				t.Fatal(err)
			}
			run := fmt.Sprintf("t%d", time.Now().UnixNano())
			st, err := compose.Up(ctx, cli, p, run, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := st.Down(context.Background()); err != nil {
					t.Errorf("Down: %v", err)
				}
			})
			web, tr := st.Container("web"), st.Container("traefik")
			if err := st.WaitHealthy(ctx, web); err != nil {
				t.Fatal(err)
			}
			rec := &eventtest.Recorder{}
			clock := event.NewClock()
			entry := "http://" + tr.Published[80]
			obs := traefik.Start(ctx, traefik.Config{Docker: cli, Container: tr.ID, API: "http://" + net.JoinHostPort(tr.IP, "8080"),
				Entry: entry, Routes: routes, Clock: clock, Sink: rec,
				Servers: map[string]traefik.Server{"web": {Service: "web", Pod: web.Name, Address: net.JoinHostPort(web.IP, "8080")}}})
			closed := false
			defer func() {
				if !closed {
					obs.Close()
				}
			}()
			wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
			defer wcancel()
			if err := obs.WaitUp(wctx); err != nil {
				t.Fatal(err)
			}
			off, err := obs.Sync(ctx, 5, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// One kernel clock: the offset is small, and its error is half a
			// loopback round trip. Generous bounds.
			if off.Shift < -time.Second || off.Shift > time.Second || off.Error > time.Second {
				t.Errorf("offset %s ± %s, want within ±1 s", off.Shift, off.Error)
			}
			// Requests every 20 ms (at most 3,000, at most 60 s) until the
			// route went and came back.
			stop := make(chan struct{})
			var statuses sync.Map
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := &http.Client{Timeout: 2 * time.Second}
				for i := 0; i < 3000; i++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if resp, err := cl.Get(entry + "/app/" + strconv.Itoa(i)); err == nil {
						resp.Body.Close()
						statuses.Store(resp.StatusCode, true)
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			waitEvent := func(what string, match func(event.Event) bool) event.Event {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for {
					if e, ok := rec.Find(match); ok {
						return e
					}
					if time.Now().After(deadline) {
						t.Fatalf("no %s within 30 s; events: %+v", what, rec.Events())
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			ready := waitEvent("endpoint-ready", func(e event.Event) bool { return e.Kind == event.EndpointReady && e.Service == "web" })
			if _, err := http.Get("http://" + net.JoinHostPort(web.IP, "8080") + "/sick"); err != nil {
				t.Fatal(err)
			}
			removed := waitEvent("endpoint-removed", func(e event.Event) bool { return e.Kind == event.EndpointRemoved && e.Service == "web" })
			if removed.Reason != tt.reason || removed.Source != traefik.SourceAccessLog || removed.At <= ready.At {
				t.Errorf("removed %+v, want reason %q from %s after %s", removed, tt.reason, traefik.SourceAccessLog, ready.At)
			}
			if _, ok := statuses.Load(tt.status); !ok {
				t.Errorf("the client never got %d from Traefik", tt.status)
			}
			if _, err := http.Get("http://" + net.JoinHostPort(web.IP, "8080") + "/well"); err != nil {
				t.Fatal(err)
			}
			back := waitEvent("endpoint-ready again", func(e event.Event) bool {
				return e.Kind == event.EndpointReady && e.Service == "web" && e.At > removed.At
			})
			if back.Source != traefik.SourceAccessLog {
				t.Errorf("back %+v", back)
			}
			if _, ok := rec.Find(func(e event.Event) bool {
				return e.Kind == event.Note && e.Source == traefik.SourceAPI && e.Labels["traefik-service"] == "app" && e.Labels["status"] != "up"
			}); !ok {
				t.Error("no API note of service app out of routing")
			}
			closed = true
			counts, problems := obs.Close()
			if len(problems) > 0 {
				t.Errorf("problems: %q", problems)
			}
			if counts.Forwarded == 0 || counts.NoRouter+counts.NoServer == 0 {
				t.Errorf("counts %+v", counts)
			}
		})
	}
}

// TestObserverUnreadable: an API nobody serves and a log that cannot be
// followed are the run's problems, each named.
func TestObserverUnreadable(t *testing.T) {
	ctx := context.Background()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	obs := traefik.Start(ctx, traefik.Config{Docker: cli, Container: "drill-no-such-container", API: dead, Entry: dead,
		Routes: &composefile.Routes{}, Clock: event.NewClock(), Sink: &eventtest.Recorder{}, Poll: 20 * time.Millisecond})
	if _, err := obs.Sync(ctx, 1, time.Second); err == nil {
		t.Error("Sync through a dead entry point succeeded")
	}
	time.Sleep(100 * time.Millisecond)
	_, problems := obs.Close()
	all := strings.Join(problems, "\n")
	for _, want := range []string{"Traefik's access log: cannot follow the container's log", "Traefik's access log: the clock probes never appeared", "Traefik's API (" + dead + "): never readable"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}
