package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/testutil/toxiproxyapi"
)

// wait bounds every wait on drill (a log line, an exit, processes gone).
const wait = 90 * time.Second

// toxiproxyServer is a toxiproxy-server child process on a free loopback
// port, with a client of its API.
type toxiproxyServer struct {
	toxiproxyapi.Client
}

// startToxiproxy runs toxiproxy-server with -proxy-metrics on a free
// loopback port until the end of the test.
func startToxiproxy(t *testing.T, bin string) *toxiproxyServer {
	t.Helper()
	for attempt := 0; attempt < 3; attempt++ {
		port, err := dependencies.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-proxy-metrics")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatalf("start toxiproxy-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		s := &toxiproxyServer{toxiproxyapi.Client{URL: "http://127.0.0.1:" + strconv.Itoa(port)}}
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := s.Proxies(); err == nil {
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					<-exited
				})
				return s
			}
			select {
			case <-exited:
				deadline = time.Time{} // port taken meanwhile: try another
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatal("toxiproxy-server did not answer")
	return nil
}

// createProxy creates a proxy listening on a free loopback port, deleted at
// the end of the test, and returns its listen address.
func (s *toxiproxyServer) createProxy(t *testing.T, name, upstream string) string {
	t.Helper()
	p, err := s.CreateProxy(name, "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatalf("create proxy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = s.DeleteProxy(name) })
	return p.Listen
}

// drillToxics lists every toxic named drill-* on the server, as
// "proxy/toxic".
func (s *toxiproxyServer) drillToxics(t *testing.T) []string {
	t.Helper()
	out, err := s.Toxics(inject.ToxicPrefix)
	if err != nil {
		t.Fatalf("list toxiproxy proxies: %v", err)
	}
	return out
}

// caseEnv is one drill run's private directory: TMPDIR, state dir, reports.
type caseEnv struct {
	Dir, Tmp, State, Out string
	RunID                string
	// Tag is set in drill's environment (DRILL_E2E_TAG=Tag), so every
	// process drill starts and that keeps its environment carries it.
	Tag string
}

// newCase makes the case directory. PostgreSQL runs as an unprivileged
// user when the tests run as root, so the directories drill's TMPDIR
// lives in are world-traversable.
func newCase(t *testing.T) *caseEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "drill-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &caseEnv{
		Dir: dir, Tmp: filepath.Join(dir, "tmp"), State: filepath.Join(dir, "state"), Out: filepath.Join(dir, "out"),
		RunID: inject.NewRunID(time.Now()), Tag: filepath.Base(dir),
	}
	if err := os.Mkdir(c.Tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, c.Tmp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// env is drill's environment.
func (c *caseEnv) env() []string {
	return append(os.Environ(), "TMPDIR="+c.Tmp, "DRILL_E2E_TAG="+c.Tag)
}

// writeScenario renders testdata/<tmpl> with data into the case dir.
func (c *caseEnv) writeScenario(t *testing.T, tmpl string, data any) string {
	t.Helper()
	tp, err := template.ParseFiles(filepath.Join("testdata", tmpl))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.Dir, strings.TrimSuffix(tmpl, ".tmpl"))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// drillProc is a running drill child process whose stderr is scanned line
// by line.
type drillProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout bytes.Buffer

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line and at EOF
	eof     bool

	done    chan struct{}
	waitErr error
}

// startDrill runs drill with args in the case's environment. At the end of
// the test a drill still running is killed, and on failure its output is
// logged.
func startDrill(t *testing.T, c *caseEnv, bin string, args ...string) *drillProc {
	t.Helper()
	p := &drillProc{t: t, changed: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = c.Dir
	p.cmd.Env = c.env()
	p.cmd.Stdout = &p.stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start drill: %v", err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.mu.Lock()
		p.eof = true
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() || os.Getenv("DRILL_E2E_LOG") != "" {
			t.Logf("drill %s\n--- stderr:\n%s\n--- stdout:\n%s", strings.Join(args, " "), p.stderr(), p.stdout.String())
		}
	})
	return p
}

func (p *drillProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits until a stderr line contains s and returns it; it fails
// the test when drill ends or `wait` passes first.
func (p *drillProc) waitLine(s string) string {
	p.t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], s) {
				l := p.lines[seen]
				p.mu.Unlock()
				return l
			}
		}
		eof, ch := p.eof, p.changed
		p.mu.Unlock()
		if eof {
			p.t.Fatalf("drill ended before logging %q", s)
		}
		select {
		case <-ch:
		case <-timer.C:
			p.t.Fatalf("drill did not log %q within %s", s, wait)
		}
	}
}

// hasLine reports whether a stderr line so far contains s.
func (p *drillProc) hasLine(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.lines, func(l string) bool { return strings.Contains(l, s) })
}

func (p *drillProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("send %s to drill: %v", sig, err)
	}
}

// exit waits for drill to end and returns its exit code, or -1 and the
// signal when a signal ended it.
func (p *drillProc) exit() (int, syscall.Signal) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		p.t.Fatalf("drill did not exit within %s", wait)
	}
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// runDrill runs a short drill command (cleanup) to completion and returns
// its exit code and stdout.
func runDrill(t *testing.T, c *caseEnv, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = c.Dir, c.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("drill %s: %v", strings.Join(args, " "), err)
	}
	code := cmd.ProcessState.ExitCode()
	if code != 0 {
		t.Logf("drill %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errb.String())
	}
	return code, out.String()
}

// proc is a process found in /proc.
type proc struct {
	PID     int
	State   string
	Cmdline string
	Cwd     string
}

func (p proc) String() string {
	return fmt.Sprintf("pid %d state %s cwd %s: %s", p.PID, p.State, p.Cwd, p.Cmdline)
}

// processesOf lists the live (not zombie) processes of a case: those with
// DRILL_E2E_TAG=<tag> in their environment (drill and the replicas it
// starts) and those whose cwd or command line lies under the case dir
// (PostgreSQL, which drill starts with a fixed environment, works in its
// data dir under drill's TMPDIR).
func processesOf(c *caseEnv) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	tag := []byte("DRILL_E2E_TAG=" + c.Tag + "\x00")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := "/proc/" + e.Name()
		stat, err := os.ReadFile(base + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+3 > len(stat) {
			continue
		}
		state := string(stat[i+2 : i+3])
		if state == "Z" || state == "X" {
			continue
		}
		environ, _ := os.ReadFile(base + "/environ")
		cmdline, _ := os.ReadFile(base + "/cmdline")
		cwd, _ := os.Readlink(base + "/cwd")
		cmd := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		if bytes.Contains(environ, tag) || strings.HasPrefix(cwd, c.Dir+"/") || strings.Contains(cmd, c.Dir+"/") {
			out = append(out, proc{PID: pid, State: state, Cmdline: cmd, Cwd: cwd})
		}
	}
	return out
}

// requireNoProcesses waits (bounded) until no process of the case is left.
func requireNoProcesses(t *testing.T, c *caseEnv) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		left := processesOf(c)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the run remain after %s:\n%s", wait, joinProcs(left))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func joinProcs(ps []proc) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

// dsnVia is dsn with its host and port replaced by addr.
func dsnVia(t *testing.T, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// selectOneLatency runs n fresh-connection SELECT 1s against dsn (each
// bounded by 5 s) and returns the median time, failing the test if any
// fails.
func selectOneLatency(t *testing.T, dsn string, n int) time.Duration {
	t.Helper()
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := selectOne(ctx, dsn)
		cancel()
		if err != nil {
			t.Fatalf("SELECT 1 through %s: %v", dsn, err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// requireNormalLatency checks that PostgreSQL answers SELECT 1 through dsn
// at its normal latency: the median of 5 fresh-connection round trips is
// within 10 times the baseline plus 250 ms (a paused proxy never answers).
func requireNormalLatency(t *testing.T, dsn string, baseline time.Duration) {
	t.Helper()
	got := selectOneLatency(t, dsn, 5)
	if limit := 10*baseline + 250*time.Millisecond; got > limit {
		t.Fatalf("SELECT 1 median %s, want <= %s (baseline %s)", got, limit, baseline)
	}
}

// runRecord is the part of run.json the tests read.
type runRecord struct {
	RunID    string `json:"runId"`
	ExitCode int    `json:"exitCode"`
	Aborted  string `json:"aborted"`
	Events   []struct {
		Kind   string `json:"kind"`
		Fault  string `json:"fault"`
		Detail string `json:"detail"`
	} `json:"events"`
	Cleanup struct {
		Verified bool `json:"verified"`
	} `json:"cleanup"`
}

// readReports checks that run.json, junit.xml and report.html were written
// under dir and returns run.json.
func readReports(t *testing.T, dir string) runRecord {
	t.Helper()
	for _, f := range []string{"run.json", "junit.xml", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("report %s not written: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r runRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("parse run.json: %v", err)
	}
	return r
}

// faultEvents lists the fault-on/fault-off/fault-error events of fault as
// "kind(detail)".
func (r runRecord) faultEvents(fault string) []string {
	var out []string
	for _, e := range r.Events {
		if e.Fault == fault && strings.HasPrefix(e.Kind, "fault-") {
			out = append(out, e.Kind+"("+e.Detail+")")
		}
	}
	return out
}

// procState is the state letter of pid ("" when it is gone).
func procState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+3 > len(stat) {
		return ""
	}
	return string(stat[i+2 : i+3])
}

// logValue extracts key=value from a slog text line.
func logValue(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
