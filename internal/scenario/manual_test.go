package scenario

import (
	"strings"
	"testing"
	"time"
)

func TestManualFaults(t *testing.T) {
	const head = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: manual
timeline:
  duration: 60s
  warmup: 5s
dependencies:
  - name: stub
    httpStub: {}
proxies:
  - name: stub
    upstream: ${dependencies.stub.addr}
streams:
  - name: s
    targets:
      - url: http://${proxies.stub.addr}/
    rate: 10/s
faults:
  - name: f
    type: latency
    proxy: stub
    latency: 10ms
`
	for _, c := range []struct {
		name, timing string
		start, end   bool
		fault        [2]time.Duration // fault:f window before the run
		wantErr      string
	}{
		{"manual start, fixed length", "    at: manual\n    for: 10s\n", true, false, [2]time.Duration{5 * time.Second, 60 * time.Second}, ""},
		{"manual start and end", "    at: manual\n    for: manual\n", true, true, [2]time.Duration{5 * time.Second, 60 * time.Second}, ""},
		{"scheduled start, manual end", "    at: 20s\n    for: manual\n", false, true, [2]time.Duration{20 * time.Second, 60 * time.Second}, ""},
		{"manual start, zero length", "    at: manual\n    for: 0s\n", false, false, [2]time.Duration{}, "for must be above 0 (or manual)"},
		{"manual end inside warmup", "    at: 1s\n    for: manual\n", false, false, [2]time.Duration{}, "inside the warmup"},
		{"manual end after the run", "    at: 61s\n    for: manual\n", false, false, [2]time.Duration{}, "after the run"},
		{"not a word drill knows", "    at: later\n    for: 5s\n", false, false, [2]time.Duration{}, "invalid duration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := LoadReader("manual.yaml", strings.NewReader(head+c.timing))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := s.Faults[0]
			if f.ManualStart != c.start || f.ManualEnd != c.end {
				t.Errorf("manual start %v end %v, want %v %v", f.ManualStart, f.ManualEnd, c.start, c.end)
			}
			for _, sp := range s.Spans() {
				if sp.Name == "fault:f" && (sp.From != c.fault[0] || sp.To != c.fault[1]) {
					t.Errorf("fault:f = [%s, %s), want [%s, %s)", sp.From, sp.To, c.fault[0], c.fault[1])
				}
				if sp.Name == WindowBaseline && c.start && sp.To != 60*time.Second {
					t.Errorf("baseline ends at %s with only a manual fault, want the run's end", sp.To)
				}
			}
		})
	}
}
