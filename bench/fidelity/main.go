// Command fidelity runs each seed drill N times one after another and
// prints, per drill, how often it was valid and gave the right verdict,
// with the load generator's lag figures read from each run's run.json. A
// verdict is right when exactly the assertions the scenario's expect.fail
// declares failed (recorded in run.json's plan) and every other passed,
// with the exit code that goes with it: 0 for a correct build (nothing
// declared), 1 for a naive twin. `make fidelity`
// runs it over scenarios/*.yaml after building bin/drill.
//
//	go run ./bench/fidelity -n 5 -drill bin/drill scenarios/*.yaml
//	go run ./bench/fidelity -from reports/fidelity-20261201T100000Z   # tabulate runs already made
//
// Each run's reports go to <out>/<drill>/run-<i>/ (drill's --out) with its
// terminal output in <out>/<drill>/run-<i>.log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("fidelity", flag.ContinueOnError)
	n := fs.Int("n", 5, "runs per drill")
	drill := fs.String("drill", "bin/drill", "the drill binary")
	out := fs.String("out", "", "directory for the runs' reports (default reports/fidelity-<UTC time>)")
	from := fs.String("from", "", "tabulate the runs already in this directory instead of running drills")
	tsv := fs.String("tsv", "", "append a row per run to this TSV file (reports/fidelity-runs.tsv: build, guest kind, getppid cost)")
	round := fs.String("round", "", "the round's label in the TSV rows (default the sitting's UTC start time)")
	commit := fs.String("commit", "", "the build's label in the TSV rows (default git rev-parse --short HEAD)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from != "" {
		runs, err := readRuns(*from)
		if err != nil {
			return err
		}
		return writeTable(stdout, tabulate(runs))
	}
	if fs.NArg() == 0 {
		return errors.New("name the scenario files to run (e.g. scenarios/*.yaml)")
	}
	if *n < 1 {
		return fmt.Errorf("-n %d: want at least 1 run per drill", *n)
	}
	if *out == "" {
		*out = filepath.Join("reports", "fidelity-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	m := readMachine()
	writeMachine(stdout)
	fmt.Fprintf(stdout, "guest:   %s (getppid %.0f ns)\n", m.Guest, m.Getppid)
	fmt.Fprintf(stdout, "runs:    %d per drill, reports under %s\n\n", *n, *out)
	if *round == "" {
		*round = time.Now().UTC().Format("20060102T1504Z")
	}
	if *commit == "" {
		*commit = headCommit()
	}
	var runs []runResult
	for _, file := range fs.Args() {
		name := drillName(file)
		for i := 1; i <= *n; i++ {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: %w", context.Cause(ctx))
			}
			dir := filepath.Join(*out, name, fmt.Sprintf("run-%d", i))
			res, err := runOnce(ctx, *drill, file, dir)
			if err != nil {
				return err
			}
			res.Drill = name
			if *tsv != "" {
				if err := appendRow(*tsv, *commit, *round, m, res, time.Now()); err != nil {
					return err
				}
			}
			log.Info("run done", "drill", name, "run", i, "exit", res.Exit, "right", res.right(), "verdicts", res.Expect, "late", res.LateShare, "lagP99", res.LagP99)
			runs = append(runs, res)
		}
	}
	fmt.Fprintln(stdout)
	return writeTable(stdout, tabulate(runs))
}

// writeMachine prints what the figures depend on.
func writeMachine(w io.Writer) {
	fmt.Fprintf(w, "date:    %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "cores:   %d\n", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			fmt.Fprintf(w, "load:    %s (1/5/15 min at the start; other work on the machine makes runs invalid)\n", strings.Join(f[:3], " "))
		}
	}
}

// drillName is a scenario file's name without its extension.
func drillName(file string) string {
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

// runOnce runs `drill run --out dir file` to its end and reads its
// run.json. The error is for a drill binary that cannot be started, or
// ctx already ended. A run in progress is not killed when ctx ends: drill
// gets the same Ctrl-C and stops in order (faults reverted, reports
// written).
func runOnce(ctx context.Context, drill, file, dir string) (runResult, error) {
	if err := ctx.Err(); err != nil {
		return runResult{}, fmt.Errorf("run %s: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return runResult{}, fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return runResult{}, fmt.Errorf("create run log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(drill, "run", "--out", dir, file)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return runResult{}, fmt.Errorf("start %s: %w", drill, err)
	}
	err = cmd.Wait()
	res := runResult{Exit: cmd.ProcessState.ExitCode()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return runResult{}, fmt.Errorf("run %s: %w", file, err)
	}
	if rec, err := record.Load(filepath.Join(dir, "run.json")); err == nil {
		res.fill(rec)
	}
	return res, nil
}

// readRuns reads <dir>/<drill>/run-*/run.json; the exit code is the one
// each record holds.
func readRuns(dir string) ([]runResult, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "run-*", "run.json"))
	if err != nil {
		return nil, fmt.Errorf("list runs in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no runs (*/run-*/run.json) in %s", dir)
	}
	sort.Strings(paths)
	var runs []runResult
	for _, p := range paths {
		rec, err := record.Load(p)
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", p, err)
		}
		res := runResult{Drill: filepath.Base(filepath.Dir(filepath.Dir(p))), Exit: rec.ExitCode}
		res.fill(rec)
		runs = append(runs, res)
	}
	return runs, nil
}

// runResult is one run of one drill.
type runResult struct {
	Drill string
	// Exit is drill's exit code.
	Exit int
	// Recorded is true when the run wrote a run.json; the lag figures
	// come from it.
	Recorded bool
	// Valid is the record's validity (no generator lag, faults on path).
	Valid bool
	// LateShare is the largest share of late requests of any stream over
	// the judged span; LagP99 the largest dispatch lag p99.
	LateShare float64
	LagP99    time.Duration
	// DrillCPU is drill's own CPU over the sampled span (run.json cpu)
	// per request completed in that span, 0 when the run recorded none.
	DrillCPU time.Duration
	// DrillWait is how long drill's threads waited for a CPU per second
	// of the sampled span (run.json cpu.drillWaitSeconds over its span;
	// thread-seconds per second), -1 when the run recorded none.
	DrillWait float64
	// Declared names the assertions the scenario's expect.fail declared
	// (run.json's plan); Failed those that failed; AsDeclared is true
	// when exactly the declared ones failed and every other passed.
	Declared, Failed []string
	AsDeclared       bool
	// Expect is how the verdicts compare with the declaration, in words.
	Expect string
}

// wantExit is the exit code a right run ends with: 1 when the run
// declared assertions to fail, else 0; a run without a record, or a
// record without a declaration (written before expect existed), falls
// back to the drill's name (-naive: 1).
func (r runResult) wantExit() int {
	if len(r.Declared) > 0 {
		return record.ExitFail
	}
	return expectedExit(r.Drill)
}

// undeclared is a -naive drill's recorded run whose plan declares no
// assertion to fail: only its exit code can be judged.
func (r runResult) undeclared() bool {
	return r.Recorded && len(r.Declared) == 0 && expectedExit(r.Drill) == record.ExitFail
}

// right reports whether the run gave the right verdict: the exit code
// that goes with its declaration and exactly the declared assertions
// failed (for an undeclared naive run, the exit code alone).
func (r runResult) right() bool {
	if r.Exit != r.wantExit() {
		return false
	}
	return r.undeclared() || (r.Recorded && r.AsDeclared)
}

// fill reads the validity and lag figures of rec over its judged span
// (warm-up to the plan's end).
func (r *runResult) fill(rec *record.Run) {
	r.Recorded = true
	r.Valid = rec.Validity.Valid()
	var from, to time.Duration
	if rec.Plan != nil {
		from, to = rec.Plan.Warmup, rec.Plan.Duration
	}
	for _, s := range rec.Series {
		if s == nil {
			continue
		}
		b := s.Window(from, to)
		if to <= from {
			b = s.Total()
		}
		if b.Requests == 0 {
			continue
		}
		r.LateShare = max(r.LateShare, float64(b.Late)/float64(b.Requests))
		r.LagP99 = max(r.LagP99, measure.Quantile(b.Lag, 99))
	}
	e := rec.Expectation()
	r.Declared, r.Failed, r.AsDeclared, r.Expect = e.Declared, e.Failed, e.Right(), e.String()
	r.DrillCPU = drillCPUPerRequest(rec)
	r.DrillWait = -1
	if c := rec.CPU; c != nil && c.DrillWaitSeconds != nil && c.To > c.From {
		r.DrillWait = *c.DrillWaitSeconds / (c.To - c.From).Seconds()
	}
}

// drillCPUPerRequest is drill's own CPU (the cpu record's drill part,
// sampled from t=0 to the end of load) divided by the requests every
// stream completed in the same span; 0 without a cpu record.
func drillCPUPerRequest(rec *record.Run) time.Duration {
	if rec.CPU == nil || len(rec.CPU.Seconds) == 0 {
		return 0
	}
	var cpu float64
	for _, p := range rec.CPU.Parts {
		if p.Kind == cpuuse.KindDrill {
			cpu += p.Seconds
		}
	}
	from, to := rec.CPU.Seconds[0].At, rec.CPU.Seconds[len(rec.CPU.Seconds)-1].At
	var n int64
	for _, s := range rec.Series {
		if s != nil {
			n += s.Window(from.Truncate(time.Second), to.Truncate(time.Second)+time.Second).Requests
		}
	}
	if n == 0 || cpu == 0 {
		return 0
	}
	return time.Duration(cpu / float64(n) * float64(time.Second))
}

// expectedExit is the exit code a drill named drill ends with when its
// run recorded no declaration: 1 for a -naive build, 0 for a correct one.
func expectedExit(drill string) int {
	if strings.HasSuffix(drill, "-naive") {
		return 1
	}
	return 0
}

// row is one drill's line of the table.
type row struct {
	Drill                              string
	Expected                           int
	Runs, Valid, Right, Wrong, Invalid int
	Other                              int
	OtherExits                         []int
	LateMedian, LateMax                float64
	LagMedian, LagMax                  time.Duration
	// CPUMedian is the median of the runs' drill CPU per request.
	CPUMedian time.Duration
	// WaitMedian and WaitMax are the runs' drill CPU wait per second
	// (thread-seconds per second), -1 when no run recorded it.
	WaitMedian, WaitMax float64
	// Declared is the assertions the drill's runs declared to fail (the
	// first recorded run's). Failed counts the runs per set of failed
	// assertions ("a,b"; "" for none), over the runs that exited 0 or 1.
	Declared []string
	Failed   map[string]int
	// Undeclared counts -naive runs judged by exit code alone (records
	// without a declaration).
	Undeclared int
}

// tabulate groups runs by drill (in the order drills first appear).
func tabulate(runs []runResult) []row {
	var rows []row
	idx := map[string]int{}
	lates := map[string][]float64{}
	lags := map[string][]time.Duration{}
	cpus := map[string][]float64{}
	waits := map[string][]float64{}
	for _, r := range runs {
		i, ok := idx[r.Drill]
		if !ok {
			i = len(rows)
			idx[r.Drill] = i
			rows = append(rows, row{Drill: r.Drill, Expected: r.wantExit(), Declared: r.Declared, Failed: map[string]int{}})
		}
		w := &rows[i]
		if w.Declared == nil && r.Declared != nil {
			w.Declared, w.Expected = r.Declared, r.wantExit()
		}
		w.Runs++
		if r.Recorded && r.Valid {
			w.Valid++
		}
		if r.Recorded && (r.Exit == record.ExitPass || r.Exit == record.ExitFail) {
			w.Failed[strings.Join(r.Failed, ",")]++
		}
		if r.undeclared() {
			w.Undeclared++
		}
		switch {
		case r.right():
			w.Right++
		case r.Exit == record.ExitPass || r.Exit == record.ExitFail:
			w.Wrong++
		case r.Exit == record.ExitInvalid:
			w.Invalid++
		default:
			w.Other++
			w.OtherExits = append(w.OtherExits, r.Exit)
		}
		if r.Recorded {
			lates[r.Drill] = append(lates[r.Drill], r.LateShare)
			lags[r.Drill] = append(lags[r.Drill], r.LagP99)
			if r.DrillCPU > 0 {
				cpus[r.Drill] = append(cpus[r.Drill], float64(r.DrillCPU))
			}
			if r.DrillWait >= 0 {
				waits[r.Drill] = append(waits[r.Drill], r.DrillWait)
			}
		}
	}
	for i := range rows {
		w := &rows[i]
		l, g := lates[w.Drill], lags[w.Drill]
		sort.Float64s(l)
		sort.Slice(g, func(a, b int) bool { return g[a] < g[b] })
		if len(l) > 0 {
			w.LateMedian, w.LateMax = median(l), l[len(l)-1]
			w.LagMedian, w.LagMax = time.Duration(median(durs(g))), g[len(g)-1]
		}
		if c := cpus[w.Drill]; len(c) > 0 {
			sort.Float64s(c)
			w.CPUMedian = time.Duration(median(c))
		}
		w.WaitMedian, w.WaitMax = -1, -1
		if c := waits[w.Drill]; len(c) > 0 {
			sort.Float64s(c)
			w.WaitMedian, w.WaitMax = median(c), c[len(c)-1]
		}
	}
	return rows
}

func durs(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v)
	}
	return out
}

// median of sorted values (the mean of the middle two for an even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// writeTable prints one line per drill and the totals.
func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DRILL\tWANT\tRUNS\tVALID\tRIGHT\tWRONG\tINVALID\tOTHER\tLATE median (max)\tLAG P99 median (max)\tDRILL CPU/REQ\tDRILL WAIT median (max)\tFAILED (runs)")
	var t row
	for _, r := range rows {
		other := strconv.Itoa(r.Other)
		if r.Other > 0 {
			ex := make([]string, len(r.OtherExits))
			for i, e := range r.OtherExits {
				ex[i] = strconv.Itoa(e)
			}
			other += " (exit " + strings.Join(ex, ", ") + ")"
		}
		want := fmt.Sprintf("exit %d", r.Expected)
		if len(r.Declared) > 0 {
			want += " on " + strings.Join(r.Declared, ",")
		}
		if r.Undeclared > 0 {
			want += fmt.Sprintf(" (%d undeclared)", r.Undeclared)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s (%s)\t%s (%s)\t%s\t%s\t%s\n", r.Drill, want, r.Runs, r.Valid, r.Right, r.Wrong, r.Invalid, other,
			pct(r.LateMedian), pct(r.LateMax), ms(r.LagMedian), ms(r.LagMax), us(r.CPUMedian), waitWords(r.WaitMedian, r.WaitMax), failedWords(r.Failed))
		t.Runs += r.Runs
		t.Valid += r.Valid
		t.Right += r.Right
		t.Wrong += r.Wrong
		t.Invalid += r.Invalid
		t.Other += r.Other
	}
	fmt.Fprintf(tw, "all\t\t%d\t%d\t%d\t%d\t%d\t%d\t\t\n", t.Runs, t.Valid, t.Right, t.Wrong, t.Invalid, t.Other)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	_, err := fmt.Fprintln(w, "\nWANT: the exit code and the assertions the scenario's expect.fail declares a run must fail on (none: every assertion passes).\n"+
		"RIGHT: that exit code with exactly those assertions failed and every other passed (run.json's results); WRONG: exit 0 or 1 otherwise\n"+
		"(an undeclared -naive run, recorded before expect existed, is judged by its exit code alone);\n"+
		"INVALID: exit 4; OTHER: any other exit. LATE: the largest share of a stream's requests sent more than its lag budget late;\n"+
		"LAG P99: the largest dispatch lag p99 of a stream; both over the judged span of each run with a run.json.\n"+
		"DRILL CPU/REQ: drill's own CPU from t=0 to the end of load (run.json cpu) per request completed then, median over the runs.\n"+
		"DRILL WAIT: how long drill's threads waited for a CPU (runnable, not running) per second of the same span (run.json cpu.drillWaitSeconds).\n"+
		"FAILED: the assertions that failed, with how many runs (exit 0 or 1) failed on exactly that set; - for none.")
	return err
}

// failedWords lists each set of failed assertions with its count of
// runs, the most frequent first ("-" for an empty set).
func failedWords(sets map[string]int) string {
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if sets[keys[i]] != sets[keys[j]] {
			return sets[keys[i]] > sets[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		name := k
		if name == "" {
			name = "-"
		}
		parts[i] = fmt.Sprintf("%s (%d)", name, sets[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// waitWords formats a median and a maximum wait per second in ms/s ("-"
// when not recorded).
func waitWords(med, worst float64) string {
	if med < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms/s (%.0f ms/s)", 1000*med, 1000*worst)
}

// us formats d in µs ("-" for 0: not recorded).
func us(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + " µs"
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) + "%" }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}
