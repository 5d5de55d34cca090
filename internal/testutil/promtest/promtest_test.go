package promtest

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		targets []Target
		want    []string
		wantErr string
	}{
		{
			name:    "pushgateway and a service",
			targets: []Target{{Job: "pushgateway", Addr: "http://127.0.0.1:9", HonorLabels: true}, {Job: "svc", Addr: "127.0.0.1:10", MetricsPath: "/m"}},
			want: []string{"scrape_interval: 1s", `job_name: "pushgateway"`, "honor_labels: true", `targets: ["127.0.0.1:9"]`,
				`job_name: "svc"`, "honor_labels: false", `metrics_path: "/m"`, `targets: ["127.0.0.1:10"]`},
		},
		{name: "no targets", want: []string{"scrape_configs:\n"}},
		{name: "no address", targets: []Target{{Job: "x"}}, wantErr: "needs a job and an address"},
		{name: "same job twice", targets: []Target{{Job: "x", Addr: "a:1"}, {Job: "x", Addr: "a:2"}}, wantErr: `job "x" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config(tc.targets)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestScrapeAndStop: a Prometheus scraping a Pushgateway sees it up and a
// pushed series with its own job label; both processes are gone once the
// subtest's cleanup ran.
func TestScrapeAndStop(t *testing.T) {
	var pids []int
	t.Run("run", func(t *testing.T) {
		pg := Pushgateway(t)
		prom := StartPrometheus(t, Target{Job: "pushgateway", Addr: pg.URL, HonorLabels: true})
		pids = append(pids, pg.PID, prom.PID)
		if _, err := os.Stat(filepath.Join(prom.Dir, "data")); err != nil || strings.HasSuffix(prom.URL, ":9090") || strings.HasPrefix(prom.Dir, "/var/lib") {
			t.Errorf("prometheus on %s with data under %s (%v), want a free port and a throwaway directory", prom.URL, prom.Dir, err)
		}
		push(t, pg.URL+"/metrics/job/probe", "promtest_pushed 42\n")
		got := WaitQuery(t, prom.URL, `promtest_pushed`, 60*time.Second, func(s []Sample) error {
			if len(s) != 1 {
				return fmt.Errorf("%w: %d series", ErrNotYet, len(s))
			}
			return nil
		})
		if got[0].Value != 42 || got[0].Labels["job"] != "probe" {
			t.Errorf("got %v, want promtest_pushed{job=\"probe\"} 42", got[0])
		}
		up, err := Query(t.Context(), prom.URL, `up{job="pushgateway"}`)
		if err != nil || len(up) != 1 || up[0].Value != 1 {
			t.Errorf("up = %v, %v", up, err)
		}
		if _, err := Query(t.Context(), prom.URL, `sum(`); err == nil || !strings.Contains(err.Error(), "bad_data") {
			t.Errorf("bad query: error %v, want bad_data", err)
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still there after cleanup (kill 0: %v)", pid, err)
		}
	}
}

func push(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain; version=0.0.4", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("push to %s: HTTP %d", url, resp.StatusCode)
	}
}
