package compose

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/event/eventtest"
)

// TestStopAndStartAgainOnEngine stops containers of a project on the real
// engine as pod-kill and rollout do (SIGTERM with the service's
// stop_grace_period, or SIGKILL), checks the engine's restart policy,
// always included, leaves them stopped, starts each again and waits
// until it serves; the watcher's events say it exited, started and was
// ready again, and count no restart.
func TestStopAndStartAgainOnEngine(t *testing.T) {
	cli := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.Rename(testImageContext(t), filepath.Join(dir, "svc")); err != nil {
		t.Fatal(err)
	}
	health := `
    healthcheck:
      test: ["CMD", "/httpd", "probe", "http://localhost:8080/healthz"]
      interval: 1s
      timeout: 1s
      retries: 2`
	yml := `services:
  term:
    build: {context: ./svc}
    image: drill-compose-test:latest
    stop_grace_period: 5s` + health + `
  stubborn:
    image: drill-compose-test:latest
    restart: unless-stopped
    stop_grace_period: 2s
    environment: {HTTPD_IGNORE_TERM: "1"}` + health + `
  killed:
    image: drill-compose-test:latest
    restart: always
`
	file := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := composefile.Load(ctx, file, "podstest", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := BuildImages(ctx, cli, p, nil); err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("t%d", time.Now().UnixNano())
	st, err := Up(ctx, cli, p, run, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	}()
	for _, c := range st.Containers {
		if err := st.WaitHealthy(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	rec := &eventtest.Recorder{}
	wctx, wcancel := context.WithCancel(ctx)
	clock := event.NewClock()
	w := Watch(wctx, cli, st, clock, rec, nil, nil)
	defer func() { wcancel(); w.Wait() }()

	for _, tt := range []struct {
		service string
		kill    bool
		grace   time.Duration
		// wantExit is the engine's exit code; the stop takes at least
		// minTook and at most maxTook.
		wantExit         int
		minTook, maxTook time.Duration
	}{
		// Ends at SIGTERM, long before its 5 s grace.
		{service: "term", grace: 5 * time.Second, wantExit: 143, maxTook: 4 * time.Second},
		// Ignores SIGTERM: the engine's SIGKILL after 2 s.
		{service: "stubborn", grace: 2 * time.Second, wantExit: 137, minTook: 2 * time.Second, maxTook: 8 * time.Second},
		// SIGKILL at once; restart: always does not bring it back.
		{service: "killed", kill: true, grace: composefile.DefaultStopGrace, wantExit: 137, maxTook: 4 * time.Second},
	} {
		t.Run(tt.service, func(t *testing.T) {
			cs := st.ServiceContainers(tt.service)
			if len(cs) != 1 {
				t.Fatalf("ServiceContainers(%s) = %d containers, want 1", tt.service, len(cs))
			}
			c := cs[0]
			if g := st.StopGrace(tt.service); g != tt.grace {
				t.Errorf("StopGrace = %s, want %s", g, tt.grace)
			}
			began, at := time.Now(), clock.Now()
			end, err := st.Stop(ctx, c, tt.kill)
			took := time.Since(began)
			if err != nil {
				t.Fatal(err)
			}
			if end.ExitCode != tt.wantExit || took < tt.minTook || took > tt.maxTook {
				t.Errorf("stop: %s after %s; want exit code %d after %s to %s", end, took, tt.wantExit, tt.minTook, tt.maxTook)
			}
			// The restart policy leaves a container stopped through the
			// API stopped: drill starts it again.
			time.Sleep(1500 * time.Millisecond)
			if on, err := st.Running(ctx, c); err != nil || on {
				t.Fatalf("1.5 s after the stop: running %v (err %v); want stopped", on, err)
			}
			if err := st.StartAgain(ctx, c); err != nil {
				t.Fatal(err)
			}
			sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
			defer scancel()
			if err := st.WaitServing(sctx, c); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the watcher's ready event after the start", 10*time.Second, func() bool {
				_, ok := rec.Find(func(e event.Event) bool {
					return e.Service == tt.service && e.Kind == event.PodReady && e.At >= at
				})
				return ok
			})
			var kinds []event.Kind
			for _, e := range rec.Events() {
				if e.Service == tt.service && e.At >= at && e.Kind != event.ProbeResult {
					kinds = append(kinds, e.Kind)
				}
			}
			want := []event.Kind{event.PodUnready, event.PodStarted, event.PodReady}
			if fmt.Sprint(kinds) != fmt.Sprint(want) {
				t.Errorf("events after the stop %v, want %v (no restart counted)", kinds, want)
			}
		})
	}
}
