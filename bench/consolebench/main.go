// Command consolebench measures what the game-day console costs a drill:
// it runs the seeds' load (2,800 + 1,400 + 150 req/s) from a real `drill
// run` child against three loopback stub listeners (bench/stub), with
// --ui and a number of viewers, and without, alternating the two sides
// round by round so that the machine's noise falls on both. It prints,
// per run and per side, the generator's dispatch lag p99 (the largest of
// the streams' over the judged span, from run.json), drill's CPU per
// completed request (the child's user+sys from its rusage, and the
// cpu record's drill part over the load span), and the child's RSS and
// live heap (GODEBUG=gctrace=1) over time. It asserts nothing.
// bench/run.sh drives it (make bench).
//
//	consolebench -drill bin/drill -urls U1,U2,U3 -duration 30s -rounds 2 -viewers 10
//	consolebench -drill bin/drill -urls U1,U2,U3 -memory 10m   # also one 10-minute run per side
//
// A viewer does what the page does, and more: it holds GET /api/events
// open and reads every message, and each second fetches GET / and the
// three plots (the page loads / once and the plots every 5 s, none while
// its tab is hidden; until 2026-12-06 it fetched them on each "point"
// message, once a second, as the viewers still do). The viewers stand in
// for a room's browsers, which run on other machines: by default they run
// in a process of their own at nice 19 (consolebench re-run as
// "consolebench view"), so that on the benchmark's one machine they use
// only the CPU the drill leaves; -viewers-nice -1 runs them inside
// consolebench at its priority.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "view" {
		if err := viewMain(ctx, os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "consolebench view:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consolebench:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	drill   string
	urls    []string
	dur     time.Duration
	rounds  int
	viewers int
	memory  time.Duration
	sample  time.Duration
	out     string
	// profile: each child writes a CPU profile beside its reports.
	profile bool
	// nice is the viewers' process's nice value (-1: in this process).
	nice int
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("consolebench", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.drill, "drill", "bin/drill", "the drill binary")
	urls := fs.String("urls", "", "three comma-separated stub base URLs (orders 2,800/s, auth 1,400/s, tax 150/s)")
	fs.DurationVar(&c.dur, "duration", 30*time.Second, "each run's timeline (the first 5 s are warm-up, not judged)")
	fs.IntVar(&c.rounds, "rounds", 2, "rounds; each runs both sides, alternating which goes first")
	fs.IntVar(&c.viewers, "viewers", 10, "viewers connected to the console in the --ui runs")
	fs.DurationVar(&c.memory, "memory", 0, "also run each side once for this long, sampling memory every -memory-sample (0: skip)")
	fs.DurationVar(&c.sample, "memory-sample", 30*time.Second, "how often the memory runs sample RSS and heap")
	fs.StringVar(&c.out, "out", "", "keep each run's reports and logs here (default: a temporary directory, removed)")
	fs.BoolVar(&c.profile, "cpuprofile", false, "each drill run writes a CPU profile, cpu.pprof, beside its reports under -out")
	fs.IntVar(&c.nice, "viewers-nice", 19, "run the viewers in a process of their own at this nice value, 0 to 19 (-1: in this process, at its priority)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.urls = strings.Split(*urls, ",")
	switch {
	case len(c.urls) != 3 || c.urls[0] == "":
		return errors.New("-urls needs three comma-separated stub URLs")
	case c.rounds < 1 || c.rounds > 20:
		return fmt.Errorf("-rounds %d: want 1 to 20", c.rounds)
	case c.viewers < 1 || c.viewers > 100:
		return fmt.Errorf("-viewers %d: want 1 to 100", c.viewers)
	case c.dur < 10*time.Second || c.dur > 30*time.Minute:
		return fmt.Errorf("-duration %s: want 10s to 30m", c.dur)
	case c.nice < -1 || c.nice > 19:
		return fmt.Errorf("-viewers-nice %d: want -1 to 19", c.nice)
	case c.memory != 0 && (c.memory < time.Minute || c.memory > time.Hour):
		return fmt.Errorf("-memory %s: want 0 or 1m to 1h", c.memory)
	}
	if c.out == "" {
		dir, err := os.MkdirTemp("", "consolebench-")
		if err != nil {
			return fmt.Errorf("make a temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		c.out = dir
	}
	writeMachine(stdout)
	fmt.Fprintf(stdout, "load:    orders 2800/s + auth 1400/s + tax 150/s on loopback stubs, timeline %s (warm-up 5 s), %d rounds, %d viewers with --ui\n", c.dur, c.rounds, c.viewers)
	if c.nice >= 0 {
		fmt.Fprintf(stdout, "viewers: in a process of their own at nice %d (standing in for browsers on other machines)\n", c.nice)
	} else {
		fmt.Fprintln(stdout, "viewers: in this process, at its priority")
	}

	var off, on []result
	for i := 1; i <= c.rounds; i++ {
		order := []bool{false, true}
		if i%2 == 0 {
			order = []bool{true, false}
		}
		for _, ui := range order {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			name := fmt.Sprintf("round-%d-%s", i, side(ui))
			res, err := runOnce(ctx, c, name, ui, c.dur, 5*time.Second)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  round %d %-12s %s\n", i, side(ui)+":", res.line())
			if ui {
				on = append(on, res)
			} else {
				off = append(off, res)
			}
		}
	}
	summarise(stdout, off, on)

	if c.memory > 0 {
		fmt.Fprintf(stdout, "== memory: one %s run per side, RSS and live heap (after the last GC) every %s\n", c.memory, c.sample)
		for _, ui := range []bool{true, false} {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			res, err := runOnce(ctx, c, "memory-"+side(ui), ui, c.memory, c.sample)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  %-12s %s\n", side(ui)+":", res.line())
			writeMemory(stdout, res.samples)
		}
	}
	return nil
}

func side(ui bool) string {
	if ui {
		return "with-ui"
	}
	return "without"
}

// writeMachine prints what the figures depend on.
func writeMachine(w io.Writer) {
	fmt.Fprintf(w, "date:    %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "cores:   %d (%s)\n", runtime.NumCPU(), cpuModel())
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			fmt.Fprintf(w, "loadavg: %s (1/5/15 min at the start; other work on the machine makes the figures noisy)\n", strings.Join(f[:3], " "))
		}
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "cpu unknown"
}

// result is one drill run.
type result struct {
	exit  int
	valid bool
	// requests completed over the whole run (every stream).
	requests int64
	// cpu is the child's user+sys CPU over its whole life.
	cpu time.Duration
	// drillPart is the run.json cpu record's drill part per request
	// completed over the sampled span (0 without one).
	drillPart time.Duration
	// lagP99 is the largest stream dispatch lag p99 over the judged span;
	// late the largest share of late requests there.
	lagP99 time.Duration
	late   float64
	// samples are RSS and live heap over time; peakRSS the kernel's
	// high-water mark (KiB).
	samples []sample
	peakRSS int64
	viewers *viewerStats
	ui      bool
}

func (r result) perRequest() time.Duration {
	if r.requests == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.requests)
}

func (r result) line() string {
	s := fmt.Sprintf("exit %d valid=%t requests=%d cpu=%.2fs (%.1f µs/req; drill part %.1f µs/req) lag p99 %.3f ms late %.3f%% peak RSS %.1f MiB",
		r.exit, r.valid, r.requests, r.cpu.Seconds(), us(r.perRequest()), us(r.drillPart), ms(r.lagP99), 100*r.late, float64(r.peakRSS)/1024)
	if len(r.samples) > 0 {
		last := r.samples[len(r.samples)-1]
		s += fmt.Sprintf(" heap %d MB at the end", last.heapMB)
	}
	if r.ui {
		v := r.viewers
		s += fmt.Sprintf("\n      viewers: at most %d event streams open at once, %d messages (%d point), %d fetches (%.1f MB), %d errors, %d reconnects",
			v.most.Load(), v.messages.Load(), v.points.Load(), v.fetches.Load(), float64(v.bytes.Load())/1e6, v.errors.Load(), v.reconnects.Load())
	}
	return s
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sample is the child's memory at one moment.
type sample struct {
	at     time.Duration
	rssKiB int64
	heapMB int64
}

// scenarioYAML is the benchmark's drill: the seeds' three streams against
// the stubs, and one latency and one error-rate assertion so that the
// console judges assertions as it does for the seeds.
const scenarioYAML = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: console-bench
timeline:
  duration: %s
  warmup: 5s
streams:
  - name: orders
    targets:
      - url: %s/orders
    rate: 2800/s
    timeout: 2s
  - name: auth
    targets:
      - url: %s/auth
    rate: 1400/s
    timeout: 2s
  - name: tax
    targets:
      - url: %s/tax
    rate: 150/s
    timeout: 10s
assertions:
  - name: orders-p99
    type: latency
    stream: orders
    percentile: p99
    maxLatency: 200ms
  - name: auth-errors
    type: error-rate
    stream: auth
    maxRate: 0.01
`

// runOnce runs `drill run` for dur (with --ui and the viewers when ui),
// sampling the child's memory every every, and reads its run.json.
func runOnce(ctx context.Context, c config, name string, ui bool, dur, every time.Duration) (result, error) {
	dir := filepath.Join(c.out, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, fmt.Errorf("create %s: %w", dir, err)
	}
	file := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, scenarioYAML, dur, c.urls[0], c.urls[1], c.urls[2]), 0o644); err != nil {
		return result{}, fmt.Errorf("write the scenario: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "drill.log"))
	if err != nil {
		return result{}, fmt.Errorf("create the run log: %w", err)
	}
	defer logf.Close()
	args := []string{"run", "--out", filepath.Join(dir, "out"), file}
	if ui {
		args = append(args, "--ui")
	}
	if c.profile {
		args = append(args, "--cpuprofile", filepath.Join(dir, "cpu.pprof"))
	}
	cmd := exec.Command(c.drill, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	cmd.Stdout = logf
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return result{}, fmt.Errorf("pipe drill's stderr: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("start %s: %w", c.drill, err)
	}
	start := time.Now()
	var heapMB atomic.Int64
	consoleURL := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		scanStderr(stderr, logf, &heapMB, consoleURL)
	}()

	// The run's own bound: its timeline, bring-up and reports, generously.
	deadline := time.AfterFunc(dur+3*time.Minute, func() { _ = cmd.Process.Signal(os.Interrupt) })
	defer deadline.Stop()
	stopOnCtx := context.AfterFunc(ctx, func() { _ = cmd.Process.Signal(os.Interrupt) })
	defer stopOnCtx()

	vctx, stopViewers := context.WithCancel(ctx)
	var vwg sync.WaitGroup
	res := result{ui: ui}
	if ui {
		res.viewers = &viewerStats{}
	}
	var viewers *viewerProc
	if ui {
		select {
		case u := <-consoleURL:
			base, token, err := splitConsoleURL(u)
			switch {
			case err != nil:
				_ = cmd.Process.Signal(os.Interrupt)
			case c.nice >= 0:
				viewers, err = startViewers(c.nice, base, token, c.viewers)
				if err != nil {
					_ = cmd.Process.Signal(os.Interrupt)
					<-scanned
					_ = cmd.Wait()
					stopViewers()
					return result{}, err
				}
			default:
				for range c.viewers {
					vwg.Add(1)
					go func() { defer vwg.Done(); view(vctx, base, token, res.viewers) }()
				}
			}
		case <-scanned:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Signal(os.Interrupt)
		}
	}

	sampled := make(chan []sample, 1)
	go func() {
		var out []sample
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-vctx.Done():
				sampled <- out
				return
			case <-t.C:
				if rss, ok := procStatus(cmd.Process.Pid, "VmRSS:"); ok {
					out = append(out, sample{at: time.Since(start).Truncate(time.Second), rssKiB: rss, heapMB: heapMB.Load()})
				}
			}
		}
	}()
	// The peak RSS is read just before the child exits: poll it.
	peak := make(chan int64, 1)
	go func() {
		var hwm int64
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-vctx.Done():
				peak <- hwm
				return
			case <-t.C:
				if v, ok := procStatus(cmd.Process.Pid, "VmHWM:"); ok {
					hwm = v
				}
			}
		}
	}()

	<-scanned
	werr := cmd.Wait()
	stopViewers()
	vwg.Wait()
	if viewers != nil {
		if err := viewers.stop(res.viewers); err != nil {
			return result{}, err
		}
	}
	res.samples, res.peakRSS = <-sampled, <-peak
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return result{}, fmt.Errorf("run drill: %w", werr)
	}
	res.exit = cmd.ProcessState.ExitCode()
	res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if res.samples == nil && heapMB.Load() > 0 {
		res.samples = []sample{{at: time.Since(start).Truncate(time.Second), heapMB: heapMB.Load()}}
	}
	rec, err := record.Load(filepath.Join(dir, "out", "run.json"))
	if err != nil {
		return res, fmt.Errorf("%s: read run.json (drill exited %d; see %s): %w", name, res.exit, logf.Name(), err)
	}
	res.fill(rec)
	return res, nil
}

// scanStderr copies drill's stderr to log, keeps the live heap of the
// newest gctrace line in heapMB, and sends the console's URL line once.
func scanStderr(r io.Reader, log io.Writer, heapMB *atomic.Int64, consoleURL chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "gc ") {
			if v, ok := gcLiveHeap(line); ok {
				heapMB.Store(v)
			}
			continue
		}
		fmt.Fprintln(log, line)
		if u, ok := strings.CutPrefix(line, "console: "); ok && !sent && strings.Contains(u, "token=") {
			consoleURL <- u
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// gcLiveHeap reads the live heap after a collection from a gctrace line
// ("... 12->13->6 MB, 14 MB goal, ...": 6).
func gcLiveHeap(line string) (int64, bool) {
	for _, f := range strings.Fields(line) {
		parts := strings.Split(f, "->")
		if len(parts) == 3 {
			v, err := strconv.ParseInt(parts[2], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// splitConsoleURL splits "http://HOST:PORT/?token=T".
func splitConsoleURL(u string) (base, token string, err error) {
	b, t, ok := strings.Cut(strings.TrimSpace(u), "?token=")
	if !ok || t == "" {
		return "", "", fmt.Errorf("console line %q has no token", u)
	}
	return strings.TrimSuffix(b, "/"), t, nil
}

// procStatus reads a "Key: N kB" line of /proc/PID/status.
func procStatus(pid int, key string) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// fill reads validity, requests, lag and the cpu record from rec.
func (r *result) fill(rec *record.Run) {
	r.valid = rec.Validity.Valid()
	var from, to time.Duration
	if rec.Plan != nil {
		from, to = rec.Plan.Warmup, rec.Plan.Duration
	}
	for _, s := range rec.Series {
		if s == nil {
			continue
		}
		r.requests += s.Total().Requests
		b := s.Window(from, to)
		if b.Requests == 0 {
			continue
		}
		r.late = max(r.late, float64(b.Late)/float64(b.Requests))
		r.lagP99 = max(r.lagP99, measure.Quantile(b.Lag, 99))
	}
	if rec.CPU == nil || len(rec.CPU.Seconds) == 0 {
		return
	}
	var cpu float64
	for _, p := range rec.CPU.Parts {
		if p.Kind == cpuuse.KindDrill {
			cpu += p.Seconds
		}
	}
	f, t := rec.CPU.Seconds[0].At.Truncate(time.Second), rec.CPU.Seconds[len(rec.CPU.Seconds)-1].At.Truncate(time.Second)+time.Second
	var n int64
	for _, s := range rec.Series {
		if s != nil {
			n += s.Window(f, t).Requests
		}
	}
	if n > 0 {
		r.drillPart = time.Duration(cpu / float64(n) * float64(time.Second))
	}
}

// viewerStats counts what the viewers saw.
type viewerStats struct {
	connected, messages, points, fetches, bytes, errors, reconnects atomic.Int64
	// most is the most event streams open at once.
	most atomic.Int64
}

// viewerCounts is what the viewers' process reports when it ends: one
// JSON line on its stdout.
type viewerCounts struct {
	Most, Messages, Points, Fetches, Bytes, Errors, Reconnects int64
}

// viewerProc is the viewers' process of its own.
type viewerProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	out   *strings.Builder
}

// startViewers starts n viewers of the console at base in a child
// process ("consolebench view") run through nice(1) at the given nice
// value, so that all its threads have it from the start.
func startViewers(nice int, base, token string, n int) (*viewerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find consolebench's own binary: %w", err)
	}
	// The token goes in the environment, not on the command line, which
	// every user of the machine can read in /proc.
	cmd := exec.Command("nice", "-n", strconv.Itoa(nice), self, "view", "-base", base, "-n", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), viewTokenEnv+"="+token)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("pipe the viewers' stdin: %w", err)
	}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the viewers (nice -n %d %s view): %w", nice, self, err)
	}
	return &viewerProc{cmd: cmd, stdin: in, out: out}, nil
}

// stop ends the viewers (their stdin closes), waits for them and adds
// their counts to st. The error is for a process that failed or printed
// no counts.
func (p *viewerProc) stop(st *viewerStats) error {
	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("the viewers' process: %w", err)
	}
	var c viewerCounts
	if err := json.Unmarshal([]byte(strings.TrimSpace(p.out.String())), &c); err != nil {
		return fmt.Errorf("the viewers' counts %q: %w", p.out.String(), err)
	}
	st.most.Store(c.Most)
	st.messages.Add(c.Messages)
	st.points.Add(c.Points)
	st.fetches.Add(c.Fetches)
	st.bytes.Add(c.Bytes)
	st.errors.Add(c.Errors)
	st.reconnects.Add(c.Reconnects)
	return nil
}

// viewTokenEnv carries the console's token to "consolebench view".
const viewTokenEnv = "CONSOLEBENCH_TOKEN"

// viewMain is "consolebench view -base URL -n N" with the console's token
// in $CONSOLEBENCH_TOKEN: n viewers until stdin closes (or a signal ends
// ctx), then their counts as one JSON line on stdout.
func viewMain(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("consolebench view", flag.ContinueOnError)
	base := fs.String("base", "", "the console's base URL, http://HOST:PORT")
	n := fs.Int("n", 10, "viewers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	token := os.Getenv(viewTokenEnv)
	if *base == "" || token == "" || *n < 1 || *n > 100 {
		return fmt.Errorf("want -base URL, -n 1 to 100 and the token in $%s", viewTokenEnv)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	st := &viewerStats{}
	var wg sync.WaitGroup
	for range *n {
		wg.Add(1)
		go func() { defer wg.Done(); view(ctx, *base, token, st) }()
	}
	wg.Wait()
	return json.NewEncoder(stdout).Encode(viewerCounts{
		Most: st.most.Load(), Messages: st.messages.Load(), Points: st.points.Load(), Fetches: st.fetches.Load(),
		Bytes: st.bytes.Load(), Errors: st.errors.Load(), Reconnects: st.reconnects.Load(),
	})
}

// view is one viewer until ctx ends: the event stream held open (and
// reopened when the console drops it), and each second GET / and the
// three plots.
func view(ctx context.Context, base, token string, st *viewerStats) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			stream(ctx, client, base, token, st)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				st.reconnects.Add(1)
			}
		}
	}()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	paths := []string{"/", "/api/plots/latency.svg", "/api/plots/throughput.svg", "/api/plots/ready.svg"}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			for _, p := range paths {
				n, err := get(ctx, client, base+p, token)
				if ctx.Err() != nil {
					break
				}
				st.fetches.Add(1)
				st.bytes.Add(n)
				if err != nil {
					st.errors.Add(1)
				}
			}
		}
	}
}

// stream reads GET /api/events until it ends.
func stream(ctx context.Context, client *http.Client, base, token string, st *viewerStats) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events", nil)
	if err != nil {
		st.errors.Add(1)
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			st.errors.Add(1)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		st.errors.Add(1)
		return
	}
	for n := st.connected.Add(1); ; {
		m := st.most.Load()
		if n <= m || st.most.CompareAndSwap(m, n) {
			break
		}
	}
	defer st.connected.Add(-1)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		st.bytes.Add(int64(len(line)) + 1)
		if name, ok := strings.CutPrefix(string(line), "event: "); ok {
			st.messages.Add(1)
			if name == "point" {
				st.points.Add(1)
			}
		}
	}
}

// get fetches url with the token and reads the body; the error is for a
// failed request or a status other than 200.
func get(ctx context.Context, client *http.Client, url, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return n, err
}

// summarise prints each side's medians over its valid runs (a run the
// machine's other work made invalid, exit 4, is left out and counted) and
// the with/without ratios.
func summarise(w io.Writer, off, on []result) {
	valid := func(rs []result) []result {
		var out []result
		for _, r := range rs {
			if r.valid {
				out = append(out, r)
			}
		}
		return out
	}
	median := func(rs []result, f func(result) float64) float64 {
		if len(rs) == 0 {
			return 0
		}
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	lag := func(r result) float64 { return ms(r.lagP99) }
	cpu := func(r result) float64 { return us(r.perRequest()) }
	part := func(r result) float64 { return us(r.drillPart) }
	rss := func(r result) float64 { return float64(r.peakRSS) / 1024 }
	voff, von := valid(off), valid(on)
	fmt.Fprintf(w, "== summary (median of the valid runs: without %d of %d, with-ui %d of %d; ratio with-ui / without, 1.05 = 5 %% dearer)\n",
		len(voff), len(off), len(von), len(on))
	for _, m := range []struct {
		name, unit string
		f          func(result) float64
	}{
		{"lag p99", "ms", lag},
		{"CPU per request (rusage)", "µs", cpu},
		{"CPU per request (drill part)", "µs", part},
		{"peak RSS", "MiB", rss},
	} {
		a, b := median(voff, m.f), median(von, m.f)
		ratio := 0.0
		if a > 0 {
			ratio = b / a
		}
		// A cost goal: the console side may be up to 5 % dearer; lower is
		// within it too (and says the rounds' noise is larger than the
		// console's cost).
		verdict := "within 5 %"
		switch {
		case ratio > 1.05:
			verdict = "NOT within 5 %"
		case ratio < 0.95:
			verdict = "within 5 % (lower with the console: the rounds' noise)"
		}
		if m.name == "peak RSS" {
			verdict = "(not a goal)"
		}
		fmt.Fprintf(w, "  %-29s without %8.3f %s, with-ui %8.3f %s, ratio %.3f %s\n", m.name+":", a, m.unit, b, m.unit, ratio, verdict)
	}
}

// writeMemory prints a memory run's samples.
func writeMemory(w io.Writer, ss []sample) {
	if len(ss) == 0 {
		fmt.Fprintln(w, "    no samples")
		return
	}
	fmt.Fprintln(w, "    t       RSS MiB  live heap MB")
	for _, s := range ss {
		fmt.Fprintf(w, "    %-7s %7.1f  %5d\n", s.at, float64(s.rssKiB)/1024, s.heapMB)
	}
}
