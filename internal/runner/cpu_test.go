package runner

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/exitcode"
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
	if len(u.Parts) != 4 || u.Parts[0].Name != "drill" || u.Parts[1].Name != "stubs" || u.Parts[2].Name != "local Services" || u.Parts[3].Name != "burner replicas" {
		t.Fatalf("parts %+v, want drill, stubs, local Services and burner replicas", u.Parts)
	}
	drill, stubs, burner := u.Parts[0], u.Parts[1], u.Parts[3]
	if l := u.Parts[2]; l.Kind != cpuuse.KindPlatform || l.Processes != 1 {
		t.Errorf("local Services: kind %q over %d processes, want platform over 1 (burner's listener)", l.Kind, l.Processes)
	}
	if stubs.Kind != cpuuse.KindPlatform || stubs.Processes != 1 || !strings.Contains(stubs.Note, "in a process of their own") {
		t.Errorf("stubs: kind %q over %d processes (%s), want platform over 1, its own process", stubs.Kind, stubs.Processes, stubs.Note)
	}
	if burner.Kind != cpuuse.KindService || burner.Processes != 1 {
		t.Errorf("burner: kind %q over %d processes, want service over 1", burner.Kind, burner.Processes)
	}
	if burner.Seconds < 0.2 || burner.Seconds <= drill.Seconds {
		t.Errorf("burner replicas used %.2f s of CPU and drill %.2f s; want the busy loop's CPU (>= 0.2 s) charged to the replicas", burner.Seconds, drill.Seconds)
	}
	if strings.Contains(drill.Note, "stub") || !strings.Contains(drill.Note, "the local Services") {
		t.Errorf("drill's note %q: want the local Services inside it, the stubs not", drill.Note)
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
