package runner

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
	"github.com/drillhq/drill/internal/workers/workerstest"
)

// TestLoadOnWorkers: drill load of a kubernetes scenario with
// load.workers 3 runs its stream on three worker pods (a fake cluster
// running them in-process), prints the merged summary with the whole
// schedule's requests and a line per worker; a worker killed mid-run makes
// it invalid (exit 4) naming the worker.
func TestLoadOnWorkers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	doc := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: workers
environment:
  type: kubernetes
  kubernetes:
    allowedContexts: [drill-test]
    namespace: drill
timeline:
  duration: 2s
load:
  workers: 3
  image: drill:test
streams:
  - name: orders
    targets:
      - url: ` + srv.URL + `/orders
    rate: 150/s
    timeout: 1s
    lagBudget:
      late: 200ms
      fraction: 0.2
`
	path := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		faults map[int]workerstest.Fault
		code   int
		want   []string
	}{
		{"healthy", nil, exitcode.OK, []string{"worker 0  done", "worker 1  done", "worker 2  done"}},
		{"killed", map[int]workerstest.Fault{1: workerstest.Killed}, exitcode.InvalidMeasurement, []string{"worker 1  FAILED"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			fc := workerstest.New(t, "drill", tc.faults)
			fc.BreakAfter = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer func() { cancel(); fc.Wait() }()
			fc.Run(ctx)
			var out bytes.Buffer
			state := t.TempDir()
			err = Load(ctx, LoadOptions{Scenario: sc, Stdout: &out, ProgressEvery: -1, Workers: WorkersOptions{
				Client: fc.Client, Logs: fc.Logs, StateDir: state, StartMargin: 700 * time.Millisecond,
				// In-process workers on a shared machine: a generous bound.
				MaxStartLate: 500 * time.Millisecond,
			}})
			if got := exitcode.Code(err); got != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not say %q:\n%s", w, out.String())
				}
			}
			if tc.code == exitcode.OK {
				// 150/s for 2 s: 300 requests in the merged summary.
				var line string
				for _, l := range strings.Split(out.String(), "\n") {
					if strings.HasPrefix(strings.TrimSpace(l), "orders") {
						line = l
					}
				}
				if f := strings.Fields(line); len(f) < 2 || f[1] != "300" {
					t.Errorf("summary line %q, want 300 requests", line)
				}
			} else if !strings.Contains(err.Error(), "worker 1") {
				t.Errorf("error %q does not name worker 1", err)
			}
			if entries, _ := workers.ReadJournals(state, ""); len(entries) > 0 {
				t.Errorf("workers journal left: %v", entries)
			}
		})
	}
}
