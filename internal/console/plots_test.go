package console

import (
	"fmt"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// TestDecimate keeps a long line's spikes and dips, in time order, within
// the bound, and leaves a short line alone.
func TestDecimate(t *testing.T) {
	line := func(n int) plotter.XYs {
		xys := make(plotter.XYs, n)
		for i := range xys {
			xys[i] = plotter.XY{X: float64(i), Y: 10}
		}
		return xys
	}
	for _, c := range []struct {
		name    string
		n       int
		spike   int // index of a one-second spike (Y 500); -1 none
		dip     int // index of a one-second dip (Y 0); -1 none
		wantLen int // 0: at most 2*groups
	}{
		{"short line as it is", 800, -1, -1, 800},
		{"an hour, flat", 3600, -1, -1, 0},
		{"an hour with a spike and a dip in one group", 3600, 1234, 1230, 0},
		{"an hour with a spike at the end", 3600, 3599, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			xys := line(c.n)
			if c.spike >= 0 {
				xys[c.spike].Y = 500
			}
			if c.dip >= 0 {
				xys[c.dip].Y = 0
			}
			got := decimate(xys, 400)
			if c.wantLen > 0 && len(got) != c.wantLen {
				t.Fatalf("%d points, want %d", len(got), c.wantLen)
			}
			if len(got) > 800 {
				t.Fatalf("%d points, want at most 800", len(got))
			}
			seen := map[float64]bool{}
			for i, p := range got {
				if i > 0 && p.X <= got[i-1].X {
					t.Fatalf("point %d at x=%g after x=%g: not in time order", i, p.X, got[i-1].X)
				}
				seen[p.X] = true
			}
			for _, at := range []int{c.spike, c.dip} {
				if at >= 0 && !seen[float64(at)] {
					t.Errorf("the point at x=%d (Y %g) was dropped", at, xys[at].Y)
				}
			}
		})
	}
}

// BenchmarkRenderThroughput renders the throughput plot (the largest: four
// lines per stream) of the seeds' three streams after 10 minutes and after
// an hour (the console keeps an hour).
func BenchmarkRenderThroughput(b *testing.B) {
	for _, secs := range []int{600, maxPoints} {
		points := make([]Point, secs)
		for i := range points {
			points[i] = Point{T: float64(i), Streams: map[string]StreamPoint{
				"orders": {P50: 1, P99: 3, Intended: 2800, Done: 2800},
				"auth":   {P50: 1, P99: 3, Intended: 1400, Done: 1399, Failed: float64(i % 3)},
				"tax":    {P50: 1, P99: 3, Intended: 150, Done: 150, Shed: float64(i % 7)},
			}}
		}
		b.Run(fmt.Sprintf("%ds", secs), func(b *testing.B) {
			var n int
			for b.Loop() {
				svg, err := renderPlot(PlotThroughput, nil, points)
				if err != nil {
					b.Fatal(err)
				}
				n = len(svg)
			}
			b.ReportMetric(float64(n), "svg-bytes")
		})
	}
}
