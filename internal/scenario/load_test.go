package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot changes into the repository root so that file names in errors
// read as users see them ("testdata/scenarios/invalid/x.yaml:3:5: ...").
func repoRoot(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", ".."))
}

func TestLoadInvalid(t *testing.T) {
	repoRoot(t)
	files, err := filepath.Glob("testdata/scenarios/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("only %d invalid fixtures, want at least 30", len(files))
	}
	located := regexp.MustCompile(`^\S+:\d+:\d+: `)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			s, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) = %+v, want an error", file, s.Metadata)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want *Errors: %v", err, err)
			}
			for _, e := range errs.List {
				if !located.MatchString(e.Error()) {
					t.Errorf("error does not name file:line:col: %q", e.Error())
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s (run with -update after checking)\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func TestLoadValid(t *testing.T) {
	repoRoot(t)
	var files []string
	for _, pattern := range []string{"scenarios/*.yaml", "testdata/scenarios/valid/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 8 {
		t.Fatalf("found only %d valid scenarios", len(files))
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			s, err := Load(file)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if s.File != file || s.Metadata.Name == "" {
				t.Errorf("File = %q, name = %q", s.File, s.Metadata.Name)
			}
			// Defaults are idempotent and a loaded scenario stays valid.
			s.SetDefaults()
			if err := s.Validate(); err != nil {
				t.Errorf("Validate after a second SetDefaults: %v", err)
			}
		})
	}
}

func TestShippedScenarios(t *testing.T) {
	repoRoot(t)
	s, err := Load("scenarios/orders-db-brownout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svc := s.Services[0]
	// Probes come from the manifest, with Kubernetes defaults filled.
	ready := svc.Probes.ReadinessProbe
	if ready == nil || ready.HTTPGet.Path != "/healthz/ready" || ready.PeriodSeconds != 5 ||
		ready.TimeoutSeconds != 1 || ready.FailureThreshold != 3 || ready.SuccessThreshold != 2 {
		t.Errorf("readiness probe = %+v", ready)
	}
	live := svc.Probes.LivenessProbe
	if live == nil || live.HTTPGet.Path != "/healthz/live" || live.PeriodSeconds != 10 || live.TimeoutSeconds != 2 ||
		live.SuccessThreshold != 1 || live.FailureThreshold != 3 {
		t.Errorf("liveness probe = %+v", live)
	}
	start := svc.Probes.StartupProbe
	if start == nil || start.InitialDelaySeconds != 10 || start.PeriodSeconds != 5 || start.FailureThreshold != 18 {
		t.Errorf("startup probe = %+v", start)
	}
	if p, ok := s.Position("services[0].probes.readinessProbe.successThreshold"); !ok || p.File != "scenarios/manifests/order-gateway.yaml" {
		t.Errorf("position of a manifest value = %+v, %v; want it in the manifest", p, ok)
	}
	if s.Streams[0].Rate.PerSecond() != 2800 || s.Faults[0].Timeout == nil || s.Faults[0].Timeout.D() != 0 {
		t.Errorf("stream or fault decoded wrong: %+v %+v", s.Streams[0].Rate, s.Faults[0])
	}

	naive, err := Load("scenarios/orders-db-brownout-naive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nsvc := naive.Services[0]
	if nsvc.Build != "naive" || nsvc.Probes.LivenessProbe.HTTPGet.Path != "/health" || nsvc.Probes.StartupProbe != nil {
		t.Errorf("naive service = %+v", nsvc)
	}
}
