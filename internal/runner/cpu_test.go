package runner

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/testutil/goroutines"
)

// TestRunRecordsCPU runs a short drill with a replica that burns CPU in a
// shell loop: run.json's cpu figures charge that CPU to the service's
// replicas, not to drill, and the summary prints the CPU line.
func TestRunRecordsCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short drill")
	}
	dir := t.TempDir()
	sc := writeScenarioIn(t, dir, `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: cpu-split
timeline:
  duration: 3s
dependencies:
  - name: stub
    httpStub: {}
services:
  - name: burner
    command: [sh, -c, 'while :; do :; done']
streams:
  - name: s
    targets:
      - url: ${dependencies.stub.url}/
    rate: 5/s
`)
	var out bytes.Buffer
	res, err := Run(context.Background(), runOptions(t, sc, &out))
	if res.Record == nil {
		t.Fatalf("no record; code %d, err %v", res.Code, err)
	}
	if res.Code != exitcode.OK && res.Code != exitcode.InvalidMeasurement {
		t.Fatalf("code %d, err %v\n%s", res.Code, err, out.String())
	}
	u := res.Record.CPU
	if u == nil {
		t.Fatalf("run.json has no cpu figures\n%s", out.String())
	}
	if len(u.Parts) != 2 || u.Parts[0].Name != "drill" || u.Parts[1].Name != "burner replicas" {
		t.Fatalf("parts %+v, want drill and burner replicas", u.Parts)
	}
	drill, burner := u.Parts[0], u.Parts[1]
	if burner.Kind != cpuuse.KindService || burner.Processes != 1 {
		t.Errorf("burner: kind %q over %d processes, want service over 1", burner.Kind, burner.Processes)
	}
	if burner.Seconds < 0.2 || burner.Seconds <= drill.Seconds {
		t.Errorf("burner replicas used %.2f s of CPU and drill %.2f s; want the busy loop's CPU (>= 0.2 s) charged to the replicas", burner.Seconds, drill.Seconds)
	}
	if !strings.Contains(drill.Note, "the HTTP stub stub") || !strings.Contains(drill.Note, "the local Services") {
		t.Errorf("drill's note %q does not say the stub and the local Service run inside it", drill.Note)
	}
	if u.Cores < 1 || u.Busy <= 0 || len(u.Seconds) < 2 {
		t.Errorf("machine: %d cores, busy %.3f, %d seconds sampled", u.Cores, u.Busy, len(u.Seconds))
	}
	if u.DrillWaitSeconds == nil {
		t.Errorf("drill's wait for a CPU was not recorded (problems: %v)", u.Problems)
	}
	line := u.Line() + "; " + u.WaitWords()
	if !strings.Contains(out.String(), "\nCPU       "+line+"\n") {
		t.Errorf("the summary has no CPU line %q:\n%s", line, out.String())
	}
}

// blockingRouter holds each request until release is closed.
type blockingRouter struct{ entered, release chan struct{} }

func (b blockingRouter) RoundTripVia(http.RoundTripper, *http.Request) (*http.Response, error) {
	b.entered <- struct{}{}
	<-b.release
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// TestLabelledRouter: in-process routing runs under the service-proxy
// label; the load worker gets its generator label back afterwards.
func TestLabelledRouter(t *testing.T) {
	br := blockingRouter{entered: make(chan struct{}), release: make(chan struct{})}
	r := labelRouters(map[string]load.Router{"svc": br})["svc"]
	after := make(chan struct{})
	done := make(chan struct{})
	go cpuuse.Do(context.Background(), cpuuse.PartGenerator, func(context.Context) {
		defer close(done)
		req, _ := http.NewRequest(http.MethodGet, "http://svc/", nil)
		if _, err := r.RoundTripVia(nil, req); err != nil {
			t.Error(err)
		}
		afterRouting(after)
	})
	<-br.entered
	check := func(fn, want string) {
		t.Helper()
		got, err := goroutines.Labels(fn, cpuuse.LabelKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || slices.ContainsFunc(got, func(v string) bool { return v != want }) {
			t.Errorf("goroutines in %s carry %s=%q, want one %q", fn, cpuuse.LabelKey, got, want)
		}
	}
	check("runner.blockingRouter.RoundTripVia", cpuuse.PartServiceProxy)
	close(br.release)
	<-after
	check("runner.afterRouting", cpuuse.PartGenerator)
	after <- struct{}{}
	<-done
}

// afterRouting signals on c, then waits for the test to read the
// goroutine's labels.
func afterRouting(c chan struct{}) {
	c <- struct{}{}
	<-c
}
