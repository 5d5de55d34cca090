package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/drillhq/drill/internal/testutil/dockertest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// composeImage is the compose package's test service
// (internal/compose/testdata/httpd) FROM scratch: the engine here has no
// registry.
const composeImage = "drill-e2e-httpd:latest"

// composeCase skips (under CI=true: fails) without a Docker engine,
// builds the test service's image, and writes the Compose file of
// service web into c's directory: the image on a fixed loopback port
// (a free one now), a healthcheck every second, restart: always and
// stop_grace_period grace; with stubborn the service ignores SIGTERM.
func composeCase(t *testing.T, c *caseEnv, grace string, stubborn bool) {
	t.Helper()
	ctx := context.Background()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	bctx := filepath.Join(c.Dir, "image")
	if err := os.Mkdir(bctx, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testproc.GoTool(), "build", "-o", filepath.Join(bctx, "httpd"), "../../internal/compose/testdata/httpd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test service: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY httpd /httpd\nENTRYPOINT [\"/httpd\"]\nCMD [\"serve\"]\n"
	if err := os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compose.BuildImage(ctx, cli, bctx, "Dockerfile", composeImage, nil); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	env := ""
	if stubborn {
		env = "    environment: {HTTPD_IGNORE_TERM: \"1\"}\n"
	}
	yml := "services:\n  web:\n    image: " + composeImage + "\n    restart: always\n    stop_grace_period: " + grace + "\n" + env +
		"    ports: [\"127.0.0.1:" + strconv.Itoa(port) + ":8080\"]\n" +
		"    healthcheck:\n      test: [\"CMD\", \"/httpd\", \"probe\", \"http://localhost:8080/healthz\"]\n" +
		"      interval: 1s\n      timeout: 1s\n      retries: 2\n"
	if err := os.WriteFile(filepath.Join(c.Dir, "compose.yaml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := compose.RemoveRun(context.Background(), cli, c.RunID); err != nil {
			t.Errorf("remove what the run left: %v", err)
		}
	})
}

// runEvents reads the events of run.json in dir.
func runEvents(t *testing.T, dir string) ([]event.Event, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Events   []event.Event `json:"events"`
		ExitCode int           `json:"exitCode"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Events, rec.ExitCode
}

// TestComposePlatformFaults runs pod-kill (SIGTERM, then SIGKILL) and a
// rollout of a Compose service through drill run on the real engine:
// each fault's events come in the local runtime's order (Killing,
// pod-deleted, pod-created; the rollout's ScalingReplicaSet steps and
// RolloutComplete), the container serves again after each (its
// pod-ready follows), no fault fails, the restarts assertion counts no
// restart (the replacements are the faults'), and nothing of the run is
// left on the engine.
func TestComposePlatformFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill for 30 s against the Docker engine")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	composeCase(t, c, "3s", false)
	faults := `  - {name: kill-term, type: pod-kill, service: web, seed: 7, at: 4s, for: 6s}
  - {name: kill-hard, type: pod-kill, service: web, pods: [web-0], signal: SIGKILL, at: 12s, for: 5s}
  - {name: roll, type: rollout, service: web, at: 19s, for: 9s}`
	scenario := c.writeScenario(t, "compose-platform.yaml.tmpl", map[string]string{"Name": "compose-faults", "Duration": "30s", "Faults": faults})
	code, out := runDrill(t, c, drill, "run", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	if code != 0 {
		t.Fatalf("drill run exited %d, want 0\n%s", code, out)
	}
	evs, _ := runEvents(t, c.Out)
	for _, tt := range []struct {
		fault string
		want  []string
	}{
		{"kill-term", []string{"fault-on", "k8s-event/Killing", "pod-deleted: ended by SIGTERM (exit code 143)", "pod-created", "fault-off"}},
		{"kill-hard", []string{"fault-on", "k8s-event/Killing", "pod-deleted: killed by SIGKILL (exit code 137)", "pod-created", "fault-off"}},
		{"roll", []string{"fault-on", "k8s-event/ScalingReplicaSet", "k8s-event/Killing", "pod-deleted: ended by SIGTERM (exit code 143)",
			"pod-created", "k8s-event/ScalingReplicaSet", "note/RolloutComplete", "fault-off"}},
	} {
		var got []string
		var created time.Duration
		for _, e := range evs {
			if e.Fault != tt.fault {
				continue
			}
			s := string(e.Kind)
			switch e.Kind {
			case event.K8sEvent, event.Note:
				s += "/" + e.Reason
			case event.PodDeleted:
				s += ": " + e.Detail
			case event.PodCreated:
				created = e.At
			}
			got = append(got, s)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("fault %s: events %q, want %q", tt.fault, got, tt.want)
		}
		// The container serves again: a pod-ready after its new start.
		ready := false
		for _, e := range evs {
			if e.Kind == event.PodReady && e.Service == "web" && e.At > created {
				ready = true
			}
		}
		if !ready {
			t.Errorf("fault %s: no pod-ready of web after its pod-created at %s", tt.fault, created)
		}
	}
	if !strings.Contains(readFile(filepath.Join(c.Out, "run.json")), `"pods replaced by faults"`) {
		t.Error("run.json's restarts result does not count the pods replaced by faults")
	}
	if left := dockertest.Leftovers(t, c.RunID); left != "" {
		t.Errorf("the run left on the engine:\n%s", left)
	}
}

// TestComposeSIGKILLMidRollout: drill run is killed with SIGKILL while
// its rollout stops the Compose service's container, which ignores
// SIGTERM (the engine sends SIGKILL after its 4 s grace, on its own).
// drill cleanup waits for that stop, starts the container again (no
// container of the service is left stopped by the fault), then removes
// the run's project; a second cleanup finds nothing.
func TestComposeSIGKILLMidRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process against the Docker engine")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	composeCase(t, c, "4s", true)
	faults := "  - {name: roll, type: rollout, service: web, at: 2s, for: 20s}"
	scenario := c.writeScenario(t, "compose-platform.yaml.tmpl", map[string]string{"Name": "compose-sigkill", "Duration": "40s", "Faults": faults})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	journal := inject.JournalPath(c.State, c.RunID)
	deadline := time.Now().Add(wait)
	for !strings.Contains(readFile(journal), `"stopping":[`) {
		if time.Now().After(deadline) {
			t.Fatalf("no rollout stopping a container after %s; journal:\n%s", wait, readFile(journal))
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.signal(syscall.SIGKILL)
	if _, sig := p.exit(); sig != syscall.SIGKILL {
		t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
	}
	if left := dockertest.Leftovers(t, c.RunID); !strings.Contains(left, "running") {
		t.Fatalf("right after the SIGKILL the container is not stopping (running, SIGTERM ignored); the test needs it:\n%s", left)
	}
	code, out := runDrill(t, c, drill, "cleanup", "--state-dir", c.State, "--run", c.RunID)
	if code != 0 {
		t.Fatalf("drill cleanup exited %d\n%s", code, out)
	}
	t.Logf("drill cleanup after the SIGKILL:\n%s", out)
	name := "drill-" + strings.ToLower(c.RunID) + "-web"
	if !strings.Contains(out, "containers of Compose service web stopped by fault roll: started again "+name) {
		t.Errorf("drill cleanup did not start the stopped container again:\n%s", out)
	}
	if !strings.Contains(out, "removed container "+name) {
		t.Errorf("drill cleanup did not remove the run's project:\n%s", out)
	}
	if left := dockertest.Leftovers(t, c.RunID); left != "" {
		t.Errorf("after drill cleanup the engine still has:\n%s", left)
	}
	code, out = runDrill(t, c, drill, "cleanup", "--state-dir", c.State, "--run", c.RunID)
	if code != 0 || strings.Contains(out, "started again") || strings.Contains(out, "removed container") {
		t.Errorf("a second drill cleanup exited %d and did something:\n%s", code, out)
	}
}
