package localenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// Kubernetes' probe defaults (core/v1 Probe), applied to zero fields.
const (
	DefaultPeriodSeconds    = 10
	DefaultTimeoutSeconds   = 1
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// maxProbeBody is how much of an HTTP probe's response body is read, as the
// kubelet does (10 KiB); the rest is discarded.
const maxProbeBody = 10 << 10

// probeSpec is one probe with Kubernetes defaults applied and times as Go
// durations.
type probeSpec struct {
	kind string // event.ProbeStartup, ProbeLiveness or ProbeReadiness

	httpGet *scenario.HTTPGetAction
	tcp     *scenario.TCPSocketAction
	exec    *scenario.ExecAction

	initialDelay time.Duration
	period       time.Duration
	timeout      time.Duration
	success      int
	failure      int
	// grace overrides the container's termination grace for kills this
	// probe causes (liveness, startup); nil: use the container's.
	grace *time.Duration
}

// newProbeSpec validates p and applies the PodSpec defaults (period 10 s,
// timeout 1 s, success 1, failure 3). It returns nil, nil when p is nil.
// Errors name the probe kind and the field, as the API server would.
func newProbeSpec(kind string, p *scenario.Probe) (*probeSpec, error) {
	if p == nil {
		return nil, nil
	}
	field := kind + "Probe"
	s := &probeSpec{kind: kind, httpGet: p.HTTPGet, tcp: p.TCPSocket, exec: p.Exec}
	n := 0
	for _, set := range []bool{p.HTTPGet != nil, p.TCPSocket != nil, p.Exec != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%s: exactly one of httpGet, tcpSocket or exec must be set (found %d)", field, n)
	}
	if p.Exec != nil && len(p.Exec.Command) == 0 {
		return nil, fmt.Errorf("%s.exec.command: must not be empty", field)
	}
	if p.HTTPGet != nil {
		switch strings.ToUpper(p.HTTPGet.Scheme) {
		case "", "HTTP", "HTTPS":
		default:
			return nil, fmt.Errorf("%s.httpGet.scheme: %q is not HTTP or HTTPS", field, p.HTTPGet.Scheme)
		}
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"periodSeconds", p.PeriodSeconds},
		{"timeoutSeconds", p.TimeoutSeconds}, {"successThreshold", p.SuccessThreshold},
		{"failureThreshold", p.FailureThreshold},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("%s.%s: must be >= 0, got %d", field, f.name, f.v)
		}
	}
	s.initialDelay = time.Duration(p.InitialDelaySeconds) * time.Second
	s.period = secondsOr(p.PeriodSeconds, DefaultPeriodSeconds)
	s.timeout = secondsOr(p.TimeoutSeconds, DefaultTimeoutSeconds)
	s.success = int(orDefault(p.SuccessThreshold, DefaultSuccessThreshold))
	s.failure = int(orDefault(p.FailureThreshold, DefaultFailureThreshold))
	if kind != event.ProbeReadiness && s.success != 1 {
		return nil, fmt.Errorf("%s.successThreshold: must be 1 for %s probes, got %d", field, kind, s.success)
	}
	if p.TerminationGracePeriodSeconds != nil {
		if kind == event.ProbeReadiness {
			return nil, fmt.Errorf("%s.terminationGracePeriodSeconds: only liveness and startup probes may set it", field)
		}
		if *p.TerminationGracePeriodSeconds < 0 {
			return nil, fmt.Errorf("%s.terminationGracePeriodSeconds: must be >= 0, got %d", field, *p.TerminationGracePeriodSeconds)
		}
		g := time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
		s.grace = &g
	}
	return s, nil
}

func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

func secondsOr(v, def int32) time.Duration {
	return time.Duration(orDefault(v, def)) * time.Second
}

// probeTarget is what a probe runs against: one running container.
type probeTarget struct {
	port int
	env  []string // the container's environment, for exec probes
	dir  string   // working directory for exec probes
}

// prober executes probes. One per replica; safe for concurrent use.
type prober struct {
	client *http.Client
}

func newProber() *prober {
	// Like the kubelet's prober: no keep-alive (every probe opens a new
	// connection), no proxy from the environment, TLS unverified.
	tr := &http.Transport{
		Proxy:              nil,
		DisableKeepAlives:  true,
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe TLS
		DialContext:        (&net.Dialer{}).DialContext,
	}
	return &prober{client: &http.Client{Transport: tr}}
}

// run executes spec once against t, bounded by spec.timeout. It returns
// whether the probe passed and a one-line reason (kubelet wording where the
// kubelet has one).
func (p *prober) run(ctx context.Context, spec *probeSpec, t probeTarget) (ok bool, detail string) {
	ctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	switch {
	case spec.httpGet != nil:
		return p.httpProbe(ctx, spec.httpGet, t.port)
	case spec.tcp != nil:
		return tcpProbe(ctx, t.port)
	default:
		return execProbe(ctx, spec.exec.Command, t)
	}
}

func (p *prober) httpProbe(ctx context.Context, a *scenario.HTTPGetAction, port int) (bool, string) {
	scheme := "http"
	if strings.EqualFold(a.Scheme, "HTTPS") {
		scheme = "https"
	}
	path := a.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Sprintf("build probe request: %v", err)
	}
	req.Header.Set("User-Agent", "kube-probe/drill")
	req.Header.Set("Accept", "*/*")
	for _, h := range a.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	res, err := p.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return false, fmt.Sprintf("Get %q: context deadline exceeded (Client.Timeout exceeded while awaiting headers)", url)
		}
		return false, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxProbeBody))
	_ = res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 400 {
		return true, "HTTP " + strconv.Itoa(res.StatusCode)
	}
	d := fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode)
	if b := oneLine(body, 120); b != "" {
		d += ": " + b
	}
	return false, d
}

func tcpProbe(ctx context.Context, port int) (bool, string) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err.Error()
	}
	_ = c.Close()
	return true, "tcp connect " + addr
}

// execProbe runs argv with the container's environment in its own process
// group; exit 0 passes. On timeout the whole group is killed and reaped.
func execProbe(ctx context.Context, argv []string, t probeTarget) (bool, string) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = t.env
	cmd.Dir = t.dir
	var out bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: maxProbeBody}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return false, fmt.Sprintf("command %q timed out", strings.Join(argv, " "))
	}
	if err != nil {
		d := err.Error()
		if o := oneLine(out.Bytes(), 120); o != "" {
			d += ": " + o
		}
		return false, d
	}
	return true, "exit 0"
}

// oneLine turns b into one trimmed line of at most n bytes.
func oneLine(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// limitedWriter keeps the first n bytes and discards the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
