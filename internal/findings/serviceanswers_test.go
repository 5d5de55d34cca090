package findings_test

import (
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
)

// TestServiceAnswersByMarker: behind drill's local Service, an answer is
// the Service's or a replica's by the marker the generator counted
// (measure.Bucket.ServiceAnswers), not by when it came. The replicas all
// leave routing at t=25.6 s, so the second 25-26 holds both the replicas'
// own 503s (before 25.6) and the Service's (after), and its middle is
// still routable: by time, the Service's 503s of that second would be the
// service's shedding. A record made before the generator counted the
// marker is still judged by time.
func TestServiceAnswersByMarker(t *testing.T) {
	build := func(counted bool) *run {
		r := newRun()
		r.allOut(25.6, 40)
		// The replicas shed on their own: 50 in second 22, 30 in second 25;
		// one replica answers 502 itself 10 times in second 23.
		r.fail(22, 23, 50, 503, "")
		r.fail(25, 26, 30, 503, "")
		r.fail(23, 24, 10, 502, "")
		// The Service answers itself: 5 502s (replica unreachable) in
		// second 24, 40 503s in the rest of second 25, then every request
		// until the replicas are back.
		r.service(24, 25, 5, 502)
		r.service(25, 26, 40, 503)
		r.service(26, 40, 100, 503)
		for _, b := range r.orders.Buckets {
			b.ServiceAnswersCounted = counted
			if !counted {
				b.ServiceAnswers = nil
			}
		}
		return r
	}
	tests := []struct {
		name    string
		counted bool
		want    []string
		figures map[string]float64
	}{
		{"counted by the marker", true,
			[]string{
				"1,035 of 1,500 requests failed",
				"80 shed with 503/429 by the service",
				"940 answered 503 by the local Service (no ready endpoint)",
				"5 answered 502 by the local Service (replica unreachable)",
				"10 other errors",
				"drill's local Service answered 945 of them itself",
			},
			map[string]float64{"shed-by-service": 80, "no-endpoint-503": 940, "bad-gateway-502": 5, "other-errors": 10,
				"answered-by-local-service": 945}},
		{"older record, by time", false,
			[]string{
				"1,035 of 1,500 requests failed",
				"120 shed with 503/429 by the service",
				"900 answered 503 by the Service (no ready endpoint)",
				"15 answered 502 by the Service (replica unreachable)",
			},
			map[string]float64{"shed-by-service": 120, "no-endpoint-503": 900, "bad-gateway-502": 15, "other-errors": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fd *findings.Finding
			all := build(tc.counted).compute()
			for i, f := range all {
				if f.Kind == findings.KindShedding && f.Fault == "pg-pause" && f.Start == sec(20) {
					fd = &all[i]
				}
			}
			if fd == nil {
				t.Fatalf("no shedding finding for the fault in %+v", all)
			}
			for _, w := range tc.want {
				if !strings.Contains(fd.Text, w) {
					t.Errorf("finding does not say %q:\n%s", w, fd.Text)
				}
			}
			got := map[string]float64{}
			for _, f := range fd.Figures {
				got[f.Name] = f.Value
			}
			for name, v := range tc.figures {
				if got[name] != v {
					t.Errorf("figure %s = %v, want %v (%s)", name, got[name], v, fd.Text)
				}
			}
			if _, ok := got["answered-by-local-service"]; ok != tc.counted {
				t.Errorf("answered-by-local-service figure present %t, want %t", ok, tc.counted)
			}
		})
	}
}

// service makes n requests of each second in [from, to) answered with code
// by drill's local Service itself.
func (r *run) service(from, to int, n int64, code int) {
	r.fail(from, to, n, code, "")
	for s := from; s < to; s++ {
		b := r.orders.Buckets[s]
		if b.ServiceAnswers == nil {
			b.ServiceAnswers = map[int]int64{}
		}
		b.ServiceAnswers[code] += n
	}
}

// TestShedCountLeavesOutServiceAnswers: the per-second shed count is the
// service's: the local Service's own 503s are not in it, and a bucket
// carries its counts through JSON, merging and packing.
func TestShedCountLeavesOutServiceAnswers(t *testing.T) {
	b := measure.NewBucket(0, sec(1))
	b.Codes[503], b.Codes[429], b.Codes[200] = 70, 5, 25
	b.ServiceAnswers = map[int]int64{503: 40}
	b.ServiceAnswersCounted = true
	if n := b.ShedCount(); n != 35 {
		t.Errorf("ShedCount = %d, want 35 (70+5 minus the Service's 40)", n)
	}
	data, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back measure.Bucket
	if err := back.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	m := measure.NewBucket(0, sec(1))
	m.Merge(&back)
	m.Merge(measure.Pack(b).Unpack())
	if m.ServiceAnswers[503] != 80 || !m.ServiceAnswersCounted || m.ShedCount() != 70 {
		t.Errorf("after JSON, merge and pack: ServiceAnswers %v counted %t shed %d, want 503:80, true, 70 (%s)",
			m.ServiceAnswers, m.ServiceAnswersCounted, m.ShedCount(), data)
	}
}
