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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/runner"
	"github.com/drillhq/drill/internal/scenario"
)

func main() {
	drill := flag.String("drill", "bin/drill", "the drill binary")
	stub := flag.String("stub", "", "the benchmarks' stub binary (bench/stub); required")
	out := flag.String("out", "", "directory for the runs' reports (default a temporary one, removed)")
	flag.Parse()
	if *stub == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: platformbench -drill BIN -stub BIN [-out DIR] SCENARIO...")
		os.Exit(2)
	}
	if err := run(context.Background(), *drill, *stub, *out, flag.Args()); err != nil {
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

func run(ctx context.Context, drill, stub, out string, files []string) error {
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
	// Each row is printed as soon as it is measured: a later scenario's
	// failure does not lose the earlier ones.
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trate\texit\tvalid\trequests\tdrill µs/req\tload alone µs/req\tratio\tdrill allocs/req\tload alone allocs/req\tratio\tstand-ins (CPU s)")
	_ = tw.Flush()
	var errs []error
	for _, f := range files {
		r, err := measure(ctx, drill, url, out, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f/s\t%d\t%v\t%d\t%.1f\t%.1f\t%.2fx\t%.1f\t%.1f\t%.2fx\t%s\n", r.name, r.rate, r.exit, r.valid, r.requests,
			r.drillUS, r.loadUS, r.drillUS/r.loadUS, r.drillAl, r.loadAl, r.drillAl/r.loadAl, r.standIns)
		_ = tw.Flush()
	}
	return errors.Join(errs...)
}

// measure runs one scenario, then drill load at its rate.
func measure(ctx context.Context, drill, url, out string, file string) (row, error) {
	sc, err := scenario.Load(file)
	if err != nil {
		return row{}, err
	}
	r := row{name: sc.Metadata.Name}
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

	// drill load alone sends the same number of requests per second: the
	// scenario's total rate over the sampled span (steps and ramps
	// averaged).
	span := u.To - u.From
	r.rate = float64(r.requests) / span.Seconds()
	stats := filepath.Join(dir, "load-alone.json")
	// The scenario's own streams (rates, steps, methods, headers, body
	// templates, timeouts) aimed at the stub: the same work for the
	// generator, without the platform.
	alone, err := streamsAt(sc, url)
	if err != nil {
		return row{}, err
	}
	aloneFile := filepath.Join(dir, "load-alone.yaml")
	if err := os.WriteFile(aloneFile, alone, 0o644); err != nil {
		return row{}, err
	}
	load := exec.CommandContext(ctx, drill, "load", aloneFile, "--progress", "-1s", "--process-stats", stats)
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

// streamsAt is a scenario of sc's streams alone (no services, faults or
// assertions) with every target's scheme and host replaced by base's
// (http://127.0.0.1:PORT/), over sc's timeline duration, as YAML for
// `drill load`.
func streamsAt(sc *scenario.Scenario, base string) ([]byte, error) {
	b, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	streams := make([]scenario.Stream, len(sc.Streams))
	for i, st := range sc.Streams {
		st.Targets = append([]scenario.Target(nil), st.Targets...)
		for j := range st.Targets {
			// ${...} references cannot be parsed as URLs: keep the path
			// after the host part, whatever the host was.
			rest := st.Targets[j].URL
			if k := strings.Index(rest, "://"); k >= 0 {
				rest = rest[k+3:]
			}
			path := "/"
			if k := strings.IndexByte(rest, '/'); k >= 0 {
				path = rest[k:]
			}
			st.Targets[j].URL = b.Scheme + "://" + b.Host + path
		}
		streams[i] = st
	}
	doc := map[string]any{
		"apiVersion": "drill.dev/v1alpha1",
		"kind":       "Scenario",
		"metadata":   map[string]string{"name": sc.Metadata.Name + "-load-alone"},
		"timeline":   map[string]any{"duration": sc.Timeline.Duration},
		"streams":    streams,
	}
	return yaml.Marshal(doc)
}
