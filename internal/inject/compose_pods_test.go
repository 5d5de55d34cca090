package inject

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/event/eventtest"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// composeTestImage is the image of the compose package's test service
// (internal/compose/testdata/httpd), FROM scratch.
const composeTestImage = "drill-inject-compose-test:latest"

// composeStack brings up, on the real engine, a project of two services
// of the compose package's test service: web (healthcheck every second,
// stop_grace_period 5s, restart: always) and stubborn (ignores SIGTERM,
// stop_grace_period 2s). It is removed when the test ends.
func composeStack(t *testing.T, ctx context.Context, run string) *compose.Stack {
	t.Helper()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	bctx := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bctx, "httpd"), "../compose/testdata/httpd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test service: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY httpd /httpd\nENTRYPOINT [\"/httpd\"]\nCMD [\"serve\"]\n"
	if err := os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compose.BuildImage(ctx, cli, bctx, "Dockerfile", composeTestImage, nil); err != nil {
		t.Fatal(err)
	}
	health := `
    healthcheck:
      test: ["CMD", "/httpd", "probe", "http://localhost:8080/healthz"]
      interval: 1s
      timeout: 1s
      retries: 2`
	yml := `services:
  web:
    image: ` + composeTestImage + `
    restart: always
    stop_grace_period: 5s` + health + `
  stubborn:
    image: ` + composeTestImage + `
    stop_grace_period: 2s
    environment: {HTTPD_IGNORE_TERM: "1"}` + health + "\n"
	file := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := composefile.Load(ctx, file, "injecttest", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := compose.Up(ctx, cli, p, run, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	})
	for _, c := range st.Containers {
		if err := st.WaitHealthy(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// running inspects a container: whether it runs and is healthy.
func running(t *testing.T, ctx context.Context, id string) (on, healthy bool) {
	t.Helper()
	cli, err := docker.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	in, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := in.Container.State
	return s.Running, s.Health != nil && s.Health.Status == "healthy"
}

// evSummary renders the events of the fault for comparison:
// kind[/reason] (detail for pod-deleted).
func evSummary(evs []event.Event, fault string) []string {
	var out []string
	for _, e := range evs {
		if e.Fault != fault {
			continue
		}
		s := string(e.Kind)
		if e.Reason != "" && e.Kind != event.PodDeleted && e.Kind != event.PodCreated {
			s += "/" + e.Reason
		}
		if e.Kind == event.K8sEvent && e.Labels["step"] != "" {
			s += ":" + e.Labels["step"]
		}
		if e.Kind == event.PodDeleted {
			s += "(" + e.Detail + ")"
		}
		out = append(out, s)
	}
	return out
}

// TestComposePodKillAndRollout runs pod-kill (SIGTERM with the grace,
// SIGKILL, named or at random with a seed) and rollout on a Compose
// service of a real engine: each container is stopped as the fault
// says, started again by drill (restart: always does not), and the
// events say so in order; the journal entry is closed at the end.
func TestComposePodKillAndRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, state := testEnv(t, nil)
	st := composeStack(t, ctx, env.RunID)
	rec := &eventtest.Recorder{}
	clock := event.NewClock()
	env.Compose = &ComposeEnv{Stack: st, Events: rec, Now: clock.Now}
	web := st.Container("web")

	for _, tt := range []struct {
		name  string
		fault scenario.Fault
		// describe is a part of Describe's line.
		describe string
		want     []string
	}{
		{
			name:     "pod-kill SIGTERM at random",
			fault:    scenario.Fault{Name: "kill-term", Type: scenario.FaultPodKill, Service: "web", Count: ptr(1), Seed: ptr(int64(7))},
			describe: "stop 1 container(s), at random (seed 7) of Compose service web (SIGTERM, SIGKILL after the stop grace period 5s)",
			want:     []string{"k8s-event/Killing", "pod-deleted(ended by SIGTERM (exit code 143))", "pod-created"},
		},
		{
			name:     "pod-kill SIGKILL named",
			fault:    scenario.Fault{Name: "kill-9", Type: scenario.FaultPodKill, Service: "web", Pods: []string{"web-0"}, Signal: scenario.SignalKill},
			describe: "stop containers web-0 of Compose service web (SIGKILL)",
			want:     []string{"k8s-event/Killing", "pod-deleted(killed by SIGKILL (exit code 137))", "pod-created"},
		},
		{
			name:     "rollout",
			fault:    scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "web"},
			describe: "rolling restart of Compose service web's 1 container(s), one after another",
			want: []string{"k8s-event/ScalingReplicaSet:down", "k8s-event/Killing", "pod-deleted(ended by SIGTERM (exit code 143))",
				"pod-created", "k8s-event/ScalingReplicaSet:up", "note/RolloutComplete"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inj, err := Build(tt.fault, env)
			if err != nil {
				t.Fatal(err)
			}
			if d := inj.(Describer).Describe(); !strings.Contains(d, tt.describe) {
				t.Errorf("Describe() = %q, want it to contain %q", d, tt.describe)
			}
			revert, err := inj.Inject(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
			defer rcancel()
			if err := revert(rctx); err != nil {
				t.Fatal(err)
			}
			if got := evSummary(rec.Events(), tt.fault.Name); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
			if on, _ := running(t, ctx, web.ID); !on {
				t.Error("web does not run after the fault's end")
			}
			if tt.fault.Type == scenario.FaultRollout {
				if _, healthy := running(t, ctx, web.ID); !healthy {
					t.Error("web is not healthy at the rollout's end")
				}
			}
			entries, err := ReadJournal(JournalPath(state, env.RunID))
			if err != nil {
				t.Fatal(err)
			}
			if p := Pending(entries); len(p) != 0 {
				t.Errorf("journal entries still pending: %+v", p)
			}
			// Serving again before the next case.
			sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
			defer scancel()
			if err := st.WaitServing(sctx, web); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestComposePodsCleanupAfterKill is `drill cleanup` after a run killed
// in the middle of a rollout's stop: the engine goes on stopping the
// container (SIGTERM ignored, SIGKILL after its 2 s grace) after drill
// died; cleanup waits for that, starts it again, and a second cleanup
// finds nothing left.
func TestComposePodsCleanupAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, state := testEnv(t, nil)
	st := composeStack(t, ctx, env.RunID)
	ctrs := st.ServiceContainers("stubborn")
	// What the rollout journals just before it stops the container.
	if err := env.Journal.Record(composePodsEntry(OpApply, "roll", "stubborn", ctrs, ctrs, 2*time.Second, nil)); err != nil {
		t.Fatal(err)
	}
	// The stop drill asked for before it died: the engine carries it on.
	stopped := make(chan error, 1)
	go func() { _, err := st.Stop(context.Background(), ctrs[0], false); stopped <- err }()
	time.Sleep(300 * time.Millisecond) // SIGTERM sent, ignored; grace running
	if on, _ := running(t, ctx, ctrs[0].ID); !on {
		t.Fatal("stubborn stopped before its grace period was over")
	}
	rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: env.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if on, _ := running(t, ctx, ctrs[0].ID); !on {
		t.Fatalf("stubborn does not run after cleanup; report %+v", rep)
	}
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].String(), "containers of Compose service stubborn stopped by fault roll: started again "+ctrs[0].Name) {
		t.Errorf("cleanup report %+v; want stubborn started again", rep)
	}
	rep, err = Cleanup(ctx, CleanupOptions{StateDir: state, RunID: env.RunID})
	if err != nil || len(rep.Removed)+len(rep.Gone)+len(rep.Failed) != 0 {
		t.Errorf("second cleanup: %+v, %v; want nothing to do", rep, err)
	}
}

// TestComposeRolloutCutShort: a rollout whose fault ends while it stops
// a container (SIGTERM ignored, SIGKILL after the 2 s grace) stops where
// it is only once that container runs again: the Revert says the rollout
// did not complete, nothing is left stopped, and a second call is quiet.
func TestComposeRolloutCutShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, state := testEnv(t, nil)
	st := composeStack(t, ctx, env.RunID)
	rec := &eventtest.Recorder{}
	env.Compose = &ComposeEnv{Stack: st, Events: rec, Now: event.NewClock().Now}
	inj, err := Build(scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "stubborn"}, env)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := inj.Inject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer rcancel()
	began := time.Now()
	err = revert(rctx)
	if err == nil || !strings.Contains(err.Error(), "rollout of Compose service stubborn did not complete by the fault's end") {
		t.Fatalf("revert: %v; want the rollout cut short", err)
	}
	if took := time.Since(began); took < 1500*time.Millisecond {
		t.Errorf("revert returned after %s, before the stop under way (2 s grace) was over", took)
	}
	c := st.Container("stubborn")
	if on, _ := running(t, ctx, c.ID); !on {
		t.Fatal("the rollout cut short left stubborn stopped")
	}
	if err := revert(ctx); err != nil {
		t.Errorf("second revert: %v; want nil (said once)", err)
	}
	entries, err := ReadJournal(JournalPath(state, env.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if p := Pending(entries); len(p) != 0 {
		t.Errorf("journal entries still pending: %+v", p)
	}
	if _, ok := rec.Find(func(e event.Event) bool { return e.Reason == "RolloutComplete" }); ok {
		t.Error("a RolloutComplete note for a rollout cut short")
	}
}
