package plan

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite the golden plan files")

func load(t *testing.T, file string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Load(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuild(t *testing.T) {
	t.Parallel()
	p, err := Build(load(t, "scenarios/orders-db-brownout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	wantWindows := []Window{
		{Name: "run", Start: 5 * s, End: 75 * s},
		{Name: "baseline", Start: 5 * s, End: 20 * s},
		{Name: "fault:pg-pause", Start: 20 * s, End: 35 * s, Fault: "pg-pause"},
		{Name: "recovery:pg-pause", Start: 35 * s, End: 65 * s, Fault: "pg-pause"},
		{Name: "after-recovery", Start: 65 * s, End: 75 * s},
	}
	if len(p.Windows) != len(wantWindows) {
		t.Fatalf("windows = %+v", p.Windows)
	}
	for i, w := range wantWindows {
		if p.Windows[i] != w {
			t.Errorf("window %d = %+v, want %+v", i, p.Windows[i], w)
		}
	}
	var kinds []string
	for _, a := range p.Actions {
		kinds = append(kinds, string(a.Kind)+"@"+a.At.String())
	}
	if got, want := strings.Join(kinds, " "), "stream-start@0s fault-on@20s fault-off@35s stream-stop@1m15s run-end@1m15s"; got != want {
		t.Errorf("actions = %s, want %s", got, want)
	}
	if len(p.Judgements) != 9 || p.Judgements[2] != (Judgement{Assertion: "baseline-p99", Type: "latency", Window: "baseline"}) ||
		p.Judgements[8] != (Judgement{Assertion: "traffic-recovered", Type: "recovery", Window: "recovery:pg-pause"}) {
		t.Errorf("judgements = %+v", p.Judgements)
	}
	if p.Duration != 75*s || p.Warmup != 5*s || p.Scenario != "orders-db-brownout" {
		t.Errorf("plan header = %s %s %s", p.Scenario, p.Duration, p.Warmup)
	}
}

func TestBuildRecoveryClippedAndNoBaseline(t *testing.T) {
	t.Parallel()
	s := load(t, "testdata/scenarios/valid/minimal.yaml")
	p, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Window("baseline"); ok {
		t.Error("a scenario without faults has a baseline window")
	}
	s = load(t, "testdata/scenarios/valid/stub-latency.yaml")
	s.Timeline.Recovery = scenario.Duration{Duration: time.Minute}
	p, err = Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := p.Window("recovery:slow"); w.End != 8*time.Second {
		t.Errorf("recovery window = %+v, want it clipped to the run's end (8s)", w)
	}
	s.Assertions[0].Window = "nope"
	if _, err := Build(s); err == nil || !strings.Contains(err.Error(), `judges window "nope"`) {
		t.Errorf("Build with a missing window: %v", err)
	}
}

func TestPrintGolden(t *testing.T) {
	t.Parallel()
	for _, file := range []string{
		"scenarios/orders-db-brownout.yaml",
		"scenarios/orders-db-brownout-naive.yaml",
		"scenarios/payment-tax-brownout.yaml",
		"scenarios/payment-lane-overload-naive.yaml",
		"scenarios/orders-overload-routing.yaml",
		"testdata/scenarios/valid/command-service.yaml",
		"testdata/scenarios/valid/minimal.yaml",
	} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			p, err := Build(load(t, file))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Print(&b, p); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", strings.TrimSuffix(filepath.Base(file), ".yaml")+".txt"), b.Bytes(), *update)
		})
	}
}

func TestFormatOffset(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "t+0.000s", 20 * time.Second: "t+20.000s",
		1500 * time.Millisecond: "t+1.500s", -250 * time.Millisecond: "t-0.250s", 90 * time.Minute: "t+5400.000s"} {
		if got := FormatOffset(d); got != want {
			t.Errorf("FormatOffset(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestPrintBringUpGolden: drill plan shows the bring-up (dependencies, a
// setup step with its secret redacted, replicas and probe timing with
// Kubernetes' defaults filled in) and says for each restarts assertion
// whether the bring-up counts: with includeStartup (the default over the
// run window, or set over another window) the row starts at bring-up and
// names the span between bring-up and the window that does not count;
// with includeStartup: false it says the bring-up is not counted. A
// kubernetes scenario's bring-up starts nothing and finds pods by
// selector; a compose scenario's comes from its Compose file.
func TestPrintBringUpGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, golden string }{
		{"internal/plan/testdata/scenarios/bringup.yaml", "bringup.txt"},
		{"scenarios/k8s/orders-db-brownout.yaml", "k8s-orders-db-brownout.txt"},
		{"testdata/scenarios/drills/compose-adr-0077-overload.yaml", "compose-adr-0077-overload.txt"},
		{"testdata/scenarios/valid/platform-faults.yaml", "platform-faults.txt"},
		{"internal/plan/testdata/scenarios/compose-platform-faults.yaml", "compose-platform-faults.txt"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			p, err := Build(load(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Print(&b, p); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.String(), "hunter2") || strings.Contains(b.String(), "swordfish") {
				t.Errorf("the plan shows a setup step's password:\n%s", b.String())
			}
			golden.Check(t, filepath.Join("testdata", tc.golden), b.Bytes(), *update)
		})
	}
}

func TestRolloutBounds(t *testing.T) {
	t.Parallel()
	one, zero, half := scenario.IntOrPercent{N: 1}, scenario.IntOrPercent{}, scenario.IntOrPercent{N: 50, Percent: true}
	tests := []struct {
		name       string
		env        scenario.EnvironmentType
		surge, una *scenario.IntOrPercent
		want       string
	}{
		{"local defaults", scenario.EnvLocal, nil, nil, "(of 3 replicas: maxSurge 25% = 1 pod, maxUnavailable 25% = 0 pods)"},
		{"local set", scenario.EnvLocal, &one, &zero, "(of 3 replicas: maxSurge 1 = 1 pod, maxUnavailable 0 = 0 pods)"},
		{"local percent rounds up and down", scenario.EnvLocal, &half, &half, "(of 3 replicas: maxSurge 50% = 2 pods, maxUnavailable 50% = 1 pod)"},
		{"kubernetes unset", scenario.EnvKubernetes, nil, nil, "(the Deployment's own maxSurge and maxUnavailable)"},
		{"kubernetes surge unset", scenario.EnvKubernetes, nil, &zero, "(the Deployment's own maxSurge)"},
		{"kubernetes both set", scenario.EnvKubernetes, &one, &zero, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scenario.Scenario{Services: []scenario.Service{{Name: "web", Replicas: 3}}}
			s.Environment.Type = tt.env
			f := scenario.Fault{Type: scenario.FaultRollout, Service: "web", MaxSurge: tt.surge, MaxUnavailable: tt.una}
			if got := rolloutBounds(s, f); got != tt.want {
				t.Errorf("rolloutBounds = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDescribeStreamNamesChecks: the stream-start line names the stream's
// response checks.
func TestDescribeStreamNamesChecks(t *testing.T) {
	five := "5"
	st := scenario.Stream{Targets: []scenario.Target{{Method: "GET", URL: "http://tax/"}}, Rate: &scenario.Rate{Freq: 150, Per: time.Second},
		Checks: []scenario.Check{{Name: "retry-after-5", Header: "Retry-After", Equals: &five}, {Name: "problem-code", JSON: "code", Equals: &five}}}
	if got, want := describeStream(st), "GET http://tax/ at 150/s, checks retry-after-5, problem-code"; got != want {
		t.Errorf("describeStream = %q, want %q", got, want)
	}
}
