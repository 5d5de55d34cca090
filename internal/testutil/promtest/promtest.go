// Package promtest starts Debian's Prometheus and Pushgateway binaries
// (packages prometheus and prometheus-pushgateway) for tests: each on a
// free loopback port with a throwaway data directory, killed with its
// process group in t.Cleanup (and by the kernel should the test binary
// die first), and queries Prometheus over its HTTP API. Tests skip, saying
// why, only when a binary is missing; any other failure fails them. It
// imports no drill package, so any package's tests may use it.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/testutil/needs"
)

// Binaries looked up on PATH.
const (
	PrometheusBin  = "prometheus"
	PushgatewayBin = "prometheus-pushgateway"
)

// StartTimeout bounds how long a server may take to answer its readiness
// endpoint after it was started (generous: the machine may be busy).
const StartTimeout = 60 * time.Second

// ScrapeInterval is the scrape and evaluation interval of the Prometheus
// [StartPrometheus] starts.
const ScrapeInterval = time.Second

// Process is a started server.
type Process struct {
	// URL is its base URL (http://127.0.0.1:PORT).
	URL string
	// PID is its process id (also its process group id).
	PID int
	// Dir is its throwaway directory (config and data; "" for the
	// Pushgateway, which keeps nothing).
	Dir string
}

// lookPath returns the path of bin or skips tb (under CI=true: fails it),
// naming the package to install.
func lookPath(tb testing.TB, bin string) string {
	tb.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		err = fmt.Errorf("%w (Debian package %s: apt-get install %s)", err, bin, bin)
	}
	needs.Part(tb, bin, err)
	return p
}

// Pushgateway starts prometheus-pushgateway on a free loopback port with
// no persistence and returns it; it is killed in tb.Cleanup. The test
// skips when the binary is missing.
func Pushgateway(tb testing.TB) *Process {
	tb.Helper()
	bin := lookPath(tb, PushgatewayBin)
	return start(tb, bin, "", func(addr string) []string {
		return []string{"--web.listen-address=" + addr, "--log.level=warn"}
	})
}

// Target is one scrape job of the Prometheus [StartPrometheus] starts.
type Target struct {
	// Job is the job name (the job label of what is scraped, unless
	// HonorLabels keeps the target's own).
	Job string
	// Addr is the target's host:port (or a URL, whose host is taken).
	Addr string
	// MetricsPath is the path scraped; default /metrics.
	MetricsPath string
	// HonorLabels keeps the job and instance labels of the scraped series
	// (as a Pushgateway's scrape must).
	HonorLabels bool
}

// StartPrometheus starts prometheus on a free loopback port with a
// generated configuration scraping targets every [ScrapeInterval] and its
// TSDB in a directory of tb.TempDir (never /var/lib/prometheus, never
// port 9090), and returns it; it is killed in tb.Cleanup. The test skips
// when the binary is missing.
func StartPrometheus(tb testing.TB, targets ...Target) *Process {
	tb.Helper()
	bin := lookPath(tb, PrometheusBin)
	dir := tb.TempDir()
	cfg, err := Config(targets)
	if err != nil {
		tb.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		tb.Fatalf("write prometheus config: %v", err)
	}
	data := filepath.Join(dir, "data")
	return start(tb, bin, dir, func(addr string) []string {
		return []string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + data,
			"--web.listen-address=" + addr,
			"--web.console.templates=" + filepath.Join(dir, "consoles"),
			"--web.console.libraries=" + filepath.Join(dir, "console_libraries"),
			"--log.level=warn",
		}
	})
}

// Config returns the prometheus.yml that scrapes targets every
// [ScrapeInterval]. Errors: a target without a job or address, or two
// with the same job.
func Config(targets []Target) (string, error) {
	var b strings.Builder
	iv := strconv.Itoa(int(ScrapeInterval/time.Second)) + "s"
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\nscrape_configs:\n", iv, iv, iv)
	seen := map[string]bool{}
	for _, t := range targets {
		addr := t.Addr
		if u, err := url.Parse(t.Addr); err == nil && u.Host != "" {
			addr = u.Host
		}
		if t.Job == "" || addr == "" {
			return "", fmt.Errorf("prometheus config: target %+v needs a job and an address", t)
		}
		if seen[t.Job] {
			return "", fmt.Errorf("prometheus config: job %q twice", t.Job)
		}
		seen[t.Job] = true
		path := t.MetricsPath
		if path == "" {
			path = "/metrics"
		}
		// JSON strings are valid YAML scalars.
		fmt.Fprintf(&b, "  - job_name: %s\n    honor_labels: %t\n    metrics_path: %s\n    static_configs:\n      - targets: [%s]\n",
			quote(t.Job), t.HonorLabels, quote(path), quote(addr))
	}
	return b.String(), nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// start runs bin with args(addr) on a free loopback address until its
// /-/ready answers 200, retrying on another port when the process exits
// (the port was taken between choosing and binding it).
func start(tb testing.TB, bin, dir string, args func(addr string) []string) *Process {
	tb.Helper()
	const attempts = 3
	for attempt := 1; attempt <= attempts; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			tb.Fatal(err)
		}
		p, exited, err := startOnce(tb, bin, dir, addr, args(addr))
		if err == nil {
			return p
		}
		if !exited || attempt == attempts {
			tb.Fatal(err)
		}
		tb.Logf("%v; retrying on another port", err)
	}
	return nil
}

// freeAddr returns a loopback host:port nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// lockedBuffer collects a process's output; safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startOnce starts one process on addr; exited reports that it ended by
// itself before it was ready.
func startOnce(tb testing.TB, bin, dir, addr string, args []string) (p *Process, exited bool, err error) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	if dir != "" {
		cmd.Dir = dir
	}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, and killed by the kernel should the test
	// binary die without running cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	base := "http://" + addr
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-done:
			return nil, true, fmt.Errorf("%s on %s exited before it was ready (%v): %s", filepath.Base(bin), addr, waitErr, logs.String())
		default:
		}
		if resp, err := client.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			kill()
			return nil, false, fmt.Errorf("%s on %s not ready within %s: %s", filepath.Base(bin), addr, StartTimeout, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Cleanup(func() {
		kill()
		if tb.Failed() {
			tb.Logf("%s on %s output:\n%s", filepath.Base(bin), addr, logs.String())
		}
	})
	return &Process{URL: base, PID: cmd.Process.Pid, Dir: dir}, false, nil
}

// Sample is one series of an instant query's vector result.
type Sample struct {
	// Labels are the series' labels, __name__ included.
	Labels map[string]string
	// Value is the sample's value.
	Value float64
}

// String writes s as name{k="v",...} value, labels sorted.
func (s Sample) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.Labels[k])
	}
	return fmt.Sprintf("%s{%s} %s", s.Labels["__name__"], strings.Join(parts, ","), strconv.FormatFloat(s.Value, 'g', -1, 64))
}

// Query runs the instant PromQL query q at the current time with GET
// /api/v1/query on the Prometheus at base and returns its vector result.
// Errors: transport, an API error (its errorType and error), or a result
// that is not a vector.
func Query(ctx context.Context, base, q string) ([]Sample, error) {
	u := base + "/api/v1/query?" + url.Values{"query": {q}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: decode answer (HTTP %d): %w", q, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", q, body.ErrorType, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", q, body.Data.ResultType)
	}
	out := make([]Sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("query %s: sample value %v is not a string", q, r.Value[1])
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: sample value: %w", q, err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// ErrNotYet is what a [WaitQuery] condition returns while the answer is
// not the awaited one yet; any error it returns is reported if the wait
// times out.
var ErrNotYet = errors.New("not yet")

// WaitQuery runs q on the Prometheus at base every 200 ms until cond
// accepts its result (returns nil), and returns that result; it fails tb
// after within, with the last result and cond's last error.
func WaitQuery(tb testing.TB, base, q string, within time.Duration, cond func([]Sample) error) []Sample {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := Query(ctx, base, q)
		cancel()
		if err == nil {
			if err = cond(got); err == nil {
				return got
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("query %s: not as awaited within %s: %v; last result: %v", q, within, err, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
