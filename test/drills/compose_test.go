package drills

import (
	"bytes"
	"context"
	"errors"
	"github.com/drillhq/drill/internal/testutil/dockertest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
	"github.com/drillhq/drill/internal/testutil/traefikimage"
	"github.com/drillhq/drill/internal/traefik"
)

// referenceImage is the image the compose drills' Compose files name.
const referenceImage = "drill-reference:local"

// composeSetup skips (under CI=true: fails) without a Docker engine or
// PostgreSQL binaries, builds a static drill and the reference image from
// it, makes sure the Traefik image is there (built from Traefik's module
// once per version, as make compose-images does), and returns the binary.
func composeSetup(t *testing.T, work string) (string, compose.Docker) {
	t.Helper()
	needPostgres(t)
	ctx := context.Background()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine (the Compose pair)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bctx := filepath.Join(work, "image")
	if err := os.MkdirAll(bctx, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(bctx, "drill")
	cmd := exec.Command(testproc.GoTool(), "build", "-o", bin, "./cmd/drill")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build a static drill: %v\n%s", err, out)
	}
	df, err := os.ReadFile(filepath.Join(root, "scenarios", "compose", "adr-0077", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bctx, "Dockerfile"), df, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compose.BuildImage(ctx, cli, bctx, "Dockerfile", referenceImage, nil); err != nil {
		t.Fatalf("build %s: %v", referenceImage, err)
	}
	traefikimage.Ensure(t, ctx, cli, root)
	return bin, cli
}

// TestComposeDrillPair runs the CI-size ADR 0077 pairs (overload, and
// PostgreSQL lost after the start) on this machine's Docker engine behind
// the real Traefik (a service of the Compose file): the correct build must
// pass, the naive one must fail on exactly the assertions its expect.fail
// declares (Traefik's 404s, the lost routes, the unhealthy container), both
// read from Traefik's access log. No container or network of any run may
// remain.
func TestComposeDrillPair(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the compose pairs take about 4 minutes")
	}
	work := workDir(t)
	drill, _ := composeSetup(t, work)
	// fault is each drill's fault on the postgres proxy.
	cases := []struct {
		drillCase
		fault string
	}{
		{drillCase{file: "compose-adr-0077-overload", also: startupGatePassed}, "overload"},
		{drillCase{file: "compose-adr-0077-overload-naive", also: droppedByTraefik}, "overload"},
		{drillCase{file: "compose-adr-0077-db-loss"}, "db-loss"},
		{drillCase{file: "compose-adr-0077-db-loss-naive", also: droppedByTraefik}, "db-loss"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			file, err := filepath.Abs(filepath.Join(scenarioDir, c.file+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			wantExit, declared := expectOf(t, file)
			out := filepath.Join(work, c.file)
			code, console := runDrill(t, drill, file, out, filepath.Join(work, "state"))
			run, loadErr := record.Load(filepath.Join(out, "run.json"))
			if loadErr != nil {
				t.Fatalf("drill exited %d and its record cannot be read: %v\n%s", code, loadErr, testproc.Tail(console, 15))
			}
			logRun(t, run)
			if left := dockertest.Leftovers(t, run.RunID); left != "" {
				t.Errorf("the run left:\n%s", left)
			}
			if code == record.ExitInvalid {
				t.Fatalf("drill exited 4: the measurement is invalid: %s", run.Validity.Summary())
			}
			if code != wantExit {
				t.Fatalf("drill exited %d (%s), want %d; results:\n%s", code, run.Error, wantExit, results(run))
			}
			fromTraefik(t, run)
			checkExpectation(t, run, declared)
			if c.also != nil {
				c.also(t, run)
			}
			throughDrillsProxy(t, run, c.fault)
		})
	}
}

// startupGatePassed checks the correct build's startup gate: the
// startup-gate assertion passed, and the container turned healthy (drill's
// up --wait) before t=0 and after PostgreSQL first answered it through the
// postgres proxy.
func startupGatePassed(t *testing.T, run *record.Run) {
	t.Helper()
	if r := mustResult(t, run, "startup-gate-once"); r.Verdict != assert.Pass {
		t.Errorf("startup-gate-once: %s (%s), want PASS", r.Verdict, r.Message)
	}
	answered, healthy := time.Duration(0), time.Duration(0)
	haveAnswer, haveHealthy := false, false
	for _, e := range run.Events {
		switch {
		case e.Kind == event.DependencyAnswered && e.Labels["proxy"] == "postgres" && !haveAnswer:
			answered, haveAnswer = e.At, true
		case e.Kind == event.PodReady && e.Service == "order-gateway" && !haveHealthy:
			healthy, haveHealthy = e.At, true
		}
	}
	switch {
	case !haveHealthy:
		t.Error("no pod-ready event of order-gateway: the container never turned healthy")
	case healthy >= 0:
		t.Errorf("order-gateway turned healthy at %s, after t=0: up --wait did not wait for it", assert.FormatOffset(healthy))
	case haveAnswer && healthy < answered:
		t.Errorf("order-gateway turned healthy at %s, before PostgreSQL first answered it (%s)", assert.FormatOffset(healthy), assert.FormatOffset(answered))
	}
}

// throughDrillsProxy checks the container reached PostgreSQL through
// drill's embedded Toxiproxy, listening on the project network's gateway:
// the proxy saw PostgreSQL answer before t=0, and the drill's fault (named
// fault) was applied to it.
func throughDrillsProxy(t *testing.T, run *record.Run, fault string) {
	t.Helper()
	answered, faulted := false, false
	for _, e := range run.Events {
		if e.Kind == event.DependencyAnswered && e.Labels["proxy"] == "postgres" && e.At < 0 {
			answered = true
		}
		if e.Kind == event.FaultOn && e.Fault == fault {
			faulted = true
		}
	}
	if !answered {
		t.Error("no dependency-answered event of proxy postgres before t=0: the container did not reach PostgreSQL through drill's proxy")
	}
	if !faulted {
		t.Errorf("no fault-on event of %s: the fault was not applied to the proxy", fault)
	}
}

// fromTraefik checks drill read Traefik: the access log's clock offset
// was measured, its API was polled, and the run's routing source is the
// access log.
func fromTraefik(t *testing.T, run *record.Run) {
	t.Helper()
	offset, api := false, false
	for _, e := range run.Events {
		offset = offset || e.Kind == event.Note && e.Source == traefik.SourceAccessLog && strings.Contains(e.Detail, "offset")
		api = api || e.Kind == event.Note && e.Source == traefik.SourceAPI && e.Labels["status"] == "up"
	}
	if !offset {
		t.Error("no note of Traefik's access log clock offset")
	}
	if !api {
		t.Error("no note of Traefik's API routing to the service")
	}
	if src := routing.For(run.Events, "order-gateway").Source; src != routing.TraefikAccessLog {
		t.Errorf("order-gateway's routing source %q, want %q", src, routing.TraefikAccessLog)
	}
}

// droppedByTraefik checks the naive build's failures were Traefik's: its
// access log shows a 404 with no router for order-gateway (Docker marked
// the container unhealthy, the Docker provider dropped its router).
func droppedByTraefik(t *testing.T, run *record.Run) {
	t.Helper()
	removed := false
	for _, e := range run.Events {
		removed = removed || e.Kind == event.EndpointRemoved && e.Source == traefik.SourceAccessLog && e.Reason == "no router" && e.Service == "order-gateway"
	}
	if !removed {
		t.Error("no endpoint-removed event from Traefik's access log (a 404 with no router) for order-gateway")
	}
}

// TestComposeCleanupAfterSIGKILL kills a compose run with SIGKILL once its
// containers (order-gateway's and Traefik's) exist, then `drill cleanup
// --run ID` must remove the run's containers, Traefik's included, and its
// network (found by their label), from the journal.
func TestComposeCleanupAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	work := workDir(t)
	drill, _ := composeSetup(t, work)
	state := filepath.Join(work, "state")
	scenario, err := filepath.Abs(filepath.Join(scenarioDir, "compose-adr-0077-overload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(drill, "run", "--out", filepath.Join(work, "killed"), "--state-dir", state, scenario)
	var console bytes.Buffer
	cmd.Stdout, cmd.Stderr = &console, &console
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The run id is the journal's name; wait for a container of it.
	var run string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if run == "" {
			if ents, _ := os.ReadDir(inject.JournalDir(state)); len(ents) == 1 {
				run = strings.TrimSuffix(ents[0].Name(), filepath.Ext(ents[0].Name()))
			}
		}
		// Both containers: order-gateway's and Traefik's.
		if run != "" {
			if left := dockertest.Leftovers(t, run); strings.Count(left, "container ") >= 2 && strings.Contains(left, "-traefik") {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no container of the run within 2 minutes:\n%s", testproc.Tail(console.Bytes(), 15))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before := dockertest.Leftovers(t, run)
	if !strings.Contains(before, "container ") || !strings.Contains(before, "network ") {
		t.Fatalf("after SIGKILL, want the run's container and network still there, got %q", before)
	}
	// Traefik is a container of the project like the others: drill labels
	// it with the run, so cleanup finds it.
	if !strings.Contains(before, "-traefik") {
		t.Errorf("after SIGKILL, want the run's Traefik container among %q", before)
	}
	out, err := exec.Command(drill, "cleanup", "--run", run, "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("drill cleanup: %v\n%s", err, out)
	}
	if left := dockertest.Leftovers(t, run); left != "" {
		t.Errorf("after drill cleanup the run left:\n%s\ncleanup said:\n%s", left, out)
	}
}
