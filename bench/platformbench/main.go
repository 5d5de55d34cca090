// Command platformbench measures what a full drill costs drill's own
// process beside the load engine alone (docs/benchmarks.md, reports/
// BENCHMARKS.md "The generator alone in its process"): for each scenario
// it runs `drill run` and reads run.json (the drill part's CPU seconds and
// drill's heap allocations over the load, the stand-ins' CPU), then runs
// `drill load` on the benchmarks' stub at the scenario's total rate for
// the same duration (--process-stats), and prints, per scenario, CPU (µs)
// and allocations per request side by side with their ratio. It asserts
// nothing.
//
//	platformbench -drill bin/drill -stub bin/stub scenarios/orders-db-brownout.yaml ...
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/runner"
	"github.com/drillhq/drill/internal/scenario"
)

func main() {
	drill := flag.String("drill", "bin/drill", "the drill binary")
	stub := flag.String("stub", "", "the benchmarks' stub binary (bench/stub); required")
	out := flag.String("out", "", "directory for the runs' reports (default a temporary one, removed)")
	loadFor := flag.Duration("load-duration", 0, "duration of each drill load (0: the scenario's)")
	flag.Parse()
	if *stub == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: platformbench -drill BIN -stub BIN [-out DIR] SCENARIO...")
		os.Exit(2)
	}
	if err := run(context.Background(), *drill, *stub, *out, *loadFor, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "platformbench:", err)
		os.Exit(1)
	}
}

// row is one scenario's figures.
type row struct {
	name            string
	exit            int
	valid           bool
	requests        int64
	drillUS, loadUS float64 // CPU per request
	drillAl, loadAl float64 // allocations per request
	standIns        string
	rate            float64
}

func run(ctx context.Context, drill, stub, out string, loadFor time.Duration, files []string) error {
	if out == "" {
		d, err := os.MkdirTemp("", "platformbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		out = d
	}
	url, stop, err := startStub(stub)
	if err != nil {
		return err
	}
	defer stop()
	var rows []row
	for _, f := range files {
		r, err := measure(ctx, drill, url, out, loadFor, f)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "platformbench: %s done\n", r.name)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trate\texit\tvalid\trequests\tdrill µs/req\tload alone µs/req\tratio\tdrill allocs/req\tload alone allocs/req\tratio\tstand-ins (CPU s)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f/s\t%d\t%v\t%d\t%.1f\t%.1f\t%.2fx\t%.1f\t%.1f\t%.2fx\t%s\n", r.name, r.rate, r.exit, r.valid, r.requests,
			r.drillUS, r.loadUS, r.drillUS/r.loadUS, r.drillAl, r.loadAl, r.drillAl/r.loadAl, r.standIns)
	}
	return tw.Flush()
}

// measure runs one scenario, then drill load at its rate.
func measure(ctx context.Context, drill, url, out string, loadFor time.Duration, file string) (row, error) {
	sc, err := scenario.Load(file)
	if err != nil {
		return row{}, err
	}
	r := row{name: sc.Metadata.Name}
	for _, st := range sc.Streams {
		if st.Rate == nil {
			return row{}, fmt.Errorf("stream %s has no constant rate", st.Name)
		}
		r.rate += st.Rate.PerSecond()
	}
	dir := filepath.Join(out, r.name)
	cmd := exec.CommandContext(ctx, drill, "run", "--out", dir, file)
	cmd.Stdout, cmd.Stderr = nil, nil
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return row{}, err
	}
	r.exit = cmd.ProcessState.ExitCode()
	rec, err := record.Load(filepath.Join(dir, "run.json"))
	if err != nil {
		return row{}, err
	}
	r.valid = rec.Validity.Valid()
	u := rec.CPU
	if u == nil {
		return row{}, errors.New("run.json has no cpu figures")
	}
	for _, s := range rec.Series {
		for _, b := range s.Buckets {
			if b.Start >= u.From && b.Start < u.To {
				r.requests += b.Requests
			}
		}
	}
	var parts []string
	for _, p := range u.Parts {
		switch p.Kind {
		case cpuuse.KindDrill:
			r.drillUS = p.Seconds * 1e6 / float64(r.requests)
		case cpuuse.KindPlatform:
			parts = append(parts, fmt.Sprintf("%s %.1f", p.Name, p.Seconds))
		}
	}
	r.standIns = strings.Join(parts, ", ")
	r.drillAl = float64(u.DrillAllocObjects) / float64(r.requests)

	d := loadFor
	if d <= 0 {
		d = u.To - u.From
	}
	stats := filepath.Join(dir, "load-alone.json")
	load := exec.CommandContext(ctx, drill, "load", "--url", url, "--rate", fmt.Sprintf("%.0f/s", r.rate),
		"--duration", d.String(), "--progress", "-1s", "--process-stats", stats)
	if b, err := load.CombinedOutput(); err != nil {
		return row{}, fmt.Errorf("drill load: %w\n%s", err, b)
	}
	b, err := os.ReadFile(stats)
	if err != nil {
		return row{}, err
	}
	var ps runner.ProcessStats
	if err := json.Unmarshal(b, &ps); err != nil {
		return row{}, err
	}
	r.loadUS = float64(ps.Self.CPU.Microseconds()) / float64(ps.Requests)
	r.loadAl = float64(ps.Self.AllocObjects) / float64(ps.Requests)
	return r, nil
}

// startStub starts the stub and returns its URL.
func startStub(bin string) (string, func(), error) {
	cmd := exec.Command(bin)
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(outp).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("read the stub's address: %w", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		stop()
		return "", nil, fmt.Errorf("stub said %q", line)
	}
	return url + "/", stop, nil
}
