package app

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// helperEnv makes the test binary run drill (helperArgs, one argument a
// line) with the process's own stdout and stderr instead of the tests, so
// whatever a library prints straight to os.Stderr is seen.
const (
	helperEnv  = "DRILL_APP_TEST_HELPER"
	helperArgs = "DRILL_APP_TEST_ARGS"
)

func TestMain(m *testing.M) {
	testproc.HelperMain(helperEnv, func() int {
		return Execute(context.Background(), os.Stdout, os.Stderr, strings.Split(os.Getenv(helperArgs), "\n"), os.Getenv)
	})
	os.Exit(m.Run())
}

// runDrillProcess runs drill with args in a process of its own and returns
// its exit code, stdout and stderr.
func runDrillProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := testproc.Command(t, helperEnv)
	cmd.Env = append(cmd.Env, helperArgs+"="+strings.Join(args, "\n"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run drill %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// TestDockerBannerNotOnStderr: drill cleanup undoing a compose run asks
// the Docker engine, and testcontainers-go announces the connection
// ("Connected to docker: ..."); at the default verbosity nothing of it
// reaches drill's stderr, and with -v it is one info record of drill's
// log, marked as the library's.
func TestDockerBannerNotOnStderr(t *testing.T) {
	// The probe's own banner is the test process's, not drill's: keep it
	// out of the test log.
	routeLibraryLogs(slog.New(slog.DiscardHandler))
	cli, err := docker.Client(context.Background())
	needs.Part(t, "Docker engine", err)
	cli.Close()
	const banner = "Connected to docker"
	for _, tc := range []struct {
		name       string
		verbose    bool
		wantBanner bool
	}{
		{"default verbosity", false, false},
		{"-v", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			j, err := inject.OpenJournal(state, "20260101.000000.d0c4e2")
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Record(inject.ComposeEntry(inject.OpApply, "20260101.000000.d0c4e2", "drill-banner-test")); err != nil {
				t.Fatal(err)
			}
			j.Close()
			args := []string{"cleanup", "--state-dir", state}
			if tc.verbose {
				args = append(args, "-v")
			}
			code, stdout, stderr := runDrillProcess(t, args...)
			if code != 0 {
				t.Fatalf("drill %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
			}
			if strings.Contains(stdout, banner) {
				t.Errorf("stdout carries the library's banner:\n%s", stdout)
			}
			got := strings.Contains(stderr, banner)
			if got != tc.wantBanner {
				t.Errorf("banner on stderr: %v, want %v; stderr:\n%s", got, tc.wantBanner, stderr)
			}
			if tc.wantBanner {
				for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
					if strings.Contains(l, banner) && (!strings.Contains(l, "level=INFO") || !strings.Contains(l, "library=testcontainers-go")) {
						t.Errorf("banner is not an info record of drill's log: %s", l)
					}
				}
			}
		})
	}
}
