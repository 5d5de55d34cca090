package scenario

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseIntOrPercent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      string
		want    IntOrPercent
		wantErr string
	}{
		{in: "0", want: IntOrPercent{}},
		{in: "3", want: IntOrPercent{N: 3}},
		{in: " 25% ", want: IntOrPercent{N: 25, Percent: true}},
		{in: "100%", want: IntOrPercent{N: 100, Percent: true}},
		{in: "101%", wantErr: "at most 100%"},
		{in: "-1", wantErr: "write e.g. 1 or 25%"},
		{in: "1.5", wantErr: "write e.g. 1 or 25%"},
		{in: "%", wantErr: "write e.g. 1 or 25%"},
	} {
		got, err := ParseIntOrPercent(c.in)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseIntOrPercent(%q) = %v, %v; want an error with %q", c.in, got, err, c.wantErr)
			}
		case err != nil || got != c.want:
			t.Errorf("ParseIntOrPercent(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestIntOrPercentOf pins the Deployment controller's rounding: maxSurge
// up, maxUnavailable down.
func TestIntOrPercentOf(t *testing.T) {
	t.Parallel()
	p25 := IntOrPercent{N: 25, Percent: true}
	for _, c := range []struct {
		v         IntOrPercent
		total     int
		up        bool
		want      int
		rationale string
	}{
		{p25, 3, true, 1, "maxSurge 25% of 3 rounds up to 1"},
		{p25, 3, false, 0, "maxUnavailable 25% of 3 rounds down to 0"},
		{p25, 4, true, 1, "25% of 4 is 1"},
		{p25, 4, false, 1, "25% of 4 is 1"},
		{p25, 10, true, 3, "2.5 up"},
		{p25, 10, false, 2, "2.5 down"},
		{IntOrPercent{N: 2}, 10, true, 2, "a count is a count"},
		{IntOrPercent{N: 100, Percent: true}, 3, false, 3, "all"},
	} {
		if got := c.v.Of(c.total, c.up); got != c.want {
			t.Errorf("%s.Of(%d, %t) = %d, want %d (%s)", c.v, c.total, c.up, got, c.want, c.rationale)
		}
	}
}

func TestIntOrPercentJSON(t *testing.T) {
	t.Parallel()
	for _, v := range []IntOrPercent{{N: 1}, {N: 25, Percent: true}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back IntOrPercent
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Errorf("%s through JSON %s: %v, %v", v, b, back, err)
		}
	}
	if b, _ := json.Marshal(IntOrPercent{N: 1}); string(b) != "1" {
		t.Errorf("a count marshals as %s, want 1", b)
	}
}

// TestPodKillDefaults: a pod-kill that names no choice ends one pod with
// the grace period; a rollout's unset bounds stay unset and resolve to
// the Deployment's 25%/25%.
func TestPodKillDefaults(t *testing.T) {
	t.Parallel()
	f := Fault{Name: "k", Type: FaultPodKill, Service: "api"}.WithDefaults()
	if f.Count == nil || *f.Count != 1 || f.Signal != SignalTerm {
		t.Errorf("pod-kill defaults: count %v, signal %q", f.Count, f.Signal)
	}
	named := Fault{Name: "k", Type: FaultPodKill, Service: "api", Pods: []string{"api-0"}}.WithDefaults()
	if named.Count != nil {
		t.Errorf("a pod-kill of named pods got count %d", *named.Count)
	}
	r := Fault{Name: "r", Type: FaultRollout, Service: "api"}.WithDefaults()
	if r.MaxSurge != nil || r.MaxUnavailable != nil {
		t.Errorf("a rollout's unset bounds were filled in (kubernetes mode must tell them apart): %v, %v", r.MaxSurge, r.MaxUnavailable)
	}
	if s, u := RolloutBounds(r); s != DefaultRolloutBound || u != DefaultRolloutBound {
		t.Errorf("rollout bounds: %v, %v, want the Deployment's 25%%/25%%", s, u)
	}
}
