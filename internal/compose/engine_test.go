package compose

import (
	"context"
	"errors"
	"fmt"
	"github.com/drillhq/drill/internal/composefile"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/event/eventtest"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// engine returns a client of this machine's Docker engine, skipping the
// test (under CI=true: failing it) when none answers.
func engine(t *testing.T) Docker {
	t.Helper()
	cli, err := docker.Client(context.Background())
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// testImageContext writes a build context (FROM scratch, the static test
// service) into a fresh directory and returns it.
func testImageContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "httpd"), "./testdata/httpd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test service: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY httpd /httpd\nENTRYPOINT [\"/httpd\"]\nCMD [\"serve\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStackOnEngine brings a two-service project up on the real engine
// (image built in the test), follows health, restarts and routing, and
// removes everything.
func TestStackOnEngine(t *testing.T) {
	cli := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.Rename(testImageContext(t), filepath.Join(dir, "svc")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "compose.yaml")
	yml := `services:
  web:
    build: {context: ./svc}
    image: drill-compose-test:latest
    restart: on-failure
    healthcheck:
      test: ["CMD", "/httpd", "probe", "http://localhost:8080/healthz"]
      interval: 1s
      timeout: 1s
      retries: 2
      start_interval: 500ms
    ports: ["127.0.0.1::8080"]
    labels:
      traefik.http.routers.web.rule: PathPrefix(` + "`/`" + `)
      traefik.http.services.web.loadbalancer.server.port: "8080"
  plain:
    image: drill-compose-test:latest
    depends_on:
      web: {condition: service_healthy}
`
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := composefile.Load(ctx, file, "enginetest", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := BuildImages(ctx, cli, p, nil); err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("t%d", time.Now().UnixNano())
	journaled := false
	st, err := Up(ctx, cli, p, run, func() error { journaled = true; return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, err := RemoveRun(context.Background(), cli, run)
		if err != nil || len(left) > 0 {
			t.Errorf("RemoveRun after Down found %v (err %v); want nothing left", left, err)
		}
	})
	defer func() {
		if err := st.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	}()
	if !journaled {
		t.Error("Up did not journal before creating")
	}
	// An engine below API 1.44 ignores start_interval: the stack says so.
	if st.EngineAPI == "" {
		t.Error("the stack did not read the engine's API version")
	}
	wantWarn := st.EngineAPI != "" && versionBelow(st.EngineAPI, StartIntervalAPI)
	if got := strings.Join(st.Warnings, "\n"); wantWarn != strings.Contains(got, "services.web.healthcheck.start_interval: 500ms is ignored by this engine") {
		t.Errorf("engine API %s: warnings %q; want a start_interval warning for web: %v", st.EngineAPI, got, wantWarn)
	}
	rec := &eventtest.Recorder{}
	clock := event.NewClock()
	serving := map[string]bool{}
	var smu sync.Mutex
	wctx, wcancel := context.WithCancel(ctx)
	w := Watch(wctx, cli, st, clock, rec, func(c *Container, on bool) { smu.Lock(); serving[c.Service] = on; smu.Unlock() }, nil)
	defer func() { wcancel(); w.Wait() }()
	isServing := func() bool { smu.Lock(); defer smu.Unlock(); return serving["web"] }

	web := st.Container("web")
	pub := web.Published[8080]
	if host, _, _ := strings.Cut(pub, ":"); host != "127.0.0.1" {
		t.Fatalf("web's port 8080 published on %q, want 127.0.0.1:PORT", pub)
	}
	waitFor(t, "web serving", 20*time.Second, func() bool { c, _ := get(t, "http://"+pub+"/x"); return c == 200 && isServing() })
	if _, ok := rec.Find(func(e event.Event) bool { return e.Kind == event.PodReady && e.Service == "plain" }); !ok {
		t.Error("no PodReady for the service without a healthcheck")
	}

	// Unhealthy: no longer serving (a Traefik would drop its routers).
	if c, b := get(t, "http://"+web.IP+":8080/sick"); c != 200 {
		t.Fatalf("/sick: %d %s", c, b)
	}
	waitFor(t, "unhealthy", 20*time.Second, func() bool {
		_, ok := rec.Find(func(e event.Event) bool { return e.Kind == event.PodUnready && e.Reason == "unhealthy" })
		return ok
	})
	un, _ := rec.Find(func(e event.Event) bool { return e.Kind == event.PodUnready && e.Reason == "unhealthy" })
	if !strings.Contains(un.Detail, "failing streak 2") || !strings.Contains(un.Detail, "503") {
		t.Errorf("unhealthy detail %q: want the failing streak and the last outputs", un.Detail)
	}
	waitFor(t, "not serving while unhealthy", 5*time.Second, func() bool { return !isServing() })
	if _, ok := rec.Find(func(e event.Event) bool { return e.Kind == event.ProbeResult && !e.OK }); !ok {
		t.Error("no failed ProbeResult")
	}

	// Healthy again: routed again.
	get(t, "http://"+web.IP+":8080/well")
	waitFor(t, "serving again", 20*time.Second, isServing)

	// A crash: the restart policy restarts it; RestartCount rises.
	get(t, "http://"+web.IP+":8080/exit")
	waitFor(t, "restart event", 30*time.Second, func() bool {
		_, ok := rec.Find(func(e event.Event) bool { return e.Kind == event.ContainerRestart && e.RestartCount == 1 })
		return ok
	})
	if _, ok := rec.Find(func(e event.Event) bool { return e.Kind == event.PodUnready && e.Reason == "exited" }); !ok {
		t.Error("no PodUnready when the container exited")
	}
}
