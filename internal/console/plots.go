package console

import (
	"bytes"
	"fmt"
	"image/color"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/drillhq/drill/internal/control"
)

// Plot names served at /api/plots/{name}.
const (
	PlotLatency    = "latency.svg"
	PlotThroughput = "throughput.svg"
	PlotReady      = "ready.svg"
)

const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 2.8 * vg.Inch
)

// plotCache keeps each plot's last rendering for the second it shows, so
// that many viewers cost one rendering a second.
type plotCache struct {
	mu   sync.Mutex
	at   map[string]float64
	svgs map[string][]byte
}

func (s *Server) getPlot(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name != PlotLatency && name != PlotThroughput && name != PlotReady {
		writeError(w, http.StatusNotFound, "no plot "+name+" (latency.svg, throughput.svg, ready.svg)")
		return
	}
	svg, err := s.plotSVG(name)
	if err != nil {
		s.log.Warn("console plot", "plot", name, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(svg)
}

// plotSVG returns plot name ([PlotLatency], [PlotThroughput] or
// [PlotReady]) of the points so far as SVG, rendered again only when a
// newer point came in since its last rendering. Its error is the
// rendering's.
func (s *Server) plotSVG(name string) ([]byte, error) {
	st, points, _, _ := s.live.snapshot()
	last := -1.0
	if len(points) > 0 {
		last = points[len(points)-1].T
	}
	s.plots.mu.Lock()
	defer s.plots.mu.Unlock()
	if svg, ok := s.plots.svgs[name]; ok && s.plots.at[name] == last {
		return svg, nil
	}
	svg, err := renderPlot(name, st, points)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	s.plots.svgs[name], s.plots.at[name] = svg, last
	return svg, nil
}

// finalPlots returns the three plots of the run as it ended, keyed by
// their names without ".svg" (latency, throughput, ready), for the "end"
// message: a page keeps them once the console has closed. A plot that
// cannot be rendered is left out (and logged).
func (s *Server) finalPlots() map[string]string {
	out := map[string]string{}
	for _, name := range []string{PlotLatency, PlotThroughput, PlotReady} {
		svg, err := s.plotSVG(name)
		if err != nil {
			s.log.Warn("console final plot", "plot", name, "err", err)
			continue
		}
		out[strings.TrimSuffix(name, ".svg")] = string(svg)
	}
	return out
}

// renderPlot draws one plot of the points so far as SVG, fault windows
// shaded (fonts are named, not embedded: the browser uses its own).
func renderPlot(name string, st *control.State, points []Point) ([]byte, error) {
	p := plot.New()
	p.X.Label.Text = "t (s)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	var lines []namedLine
	switch name {
	case PlotLatency:
		p.Title.Text = "Latency per stream (ms)"
		for _, s := range streamNames(points) {
			lines = append(lines,
				namedLine{s + " p50", series(points, func(pt Point) (float64, bool) { v, ok := pt.Streams[s]; return v.P50, ok }), false},
				namedLine{s + " p99", series(points, func(pt Point) (float64, bool) { v, ok := pt.Streams[s]; return v.P99, ok }), true})
		}
	case PlotThroughput:
		p.Title.Text = "Throughput (req/s)"
		for _, s := range streamNames(points) {
			get := func(f func(StreamPoint) float64) func(Point) (float64, bool) {
				return func(pt Point) (float64, bool) { v, ok := pt.Streams[s]; return f(v), ok }
			}
			lines = append(lines,
				namedLine{s + " intended", series(points, get(func(v StreamPoint) float64 { return v.Intended })), true},
				namedLine{s + " completed", series(points, get(func(v StreamPoint) float64 { return v.Done })), false},
				namedLine{s + " failed", series(points, get(func(v StreamPoint) float64 { return v.Failed })), false},
				namedLine{s + " shed", series(points, get(func(v StreamPoint) float64 { return v.Shed })), false})
		}
	case PlotReady:
		p.Title.Text = "Ready replicas per service"
		for _, s := range serviceNames(points) {
			lines = append(lines, namedLine{s, series(points, func(pt Point) (float64, bool) {
				v, ok := pt.Ready[s]
				return float64(v.Ready), ok
			}), false})
		}
	}
	hi := 1.0
	for _, l := range lines {
		for _, xy := range l.xys {
			hi = max(hi, xy.Y)
		}
	}
	p.Y.Min, p.Y.Max = 0, hi*1.25
	end := 1.0
	if st != nil {
		end = max(st.Duration.Seconds(), st.Now.Seconds())
		for _, f := range st.Faults {
			if f.OnAt < 0 {
				continue
			}
			to := st.Now.Seconds()
			if f.OffAt >= 0 {
				to = f.OffAt.Seconds()
			}
			poly, err := plotter.NewPolygon(plotter.XYs{{X: f.OnAt.Seconds(), Y: 0}, {X: to, Y: 0}, {X: to, Y: p.Y.Max}, {X: f.OnAt.Seconds(), Y: p.Y.Max}})
			if err != nil {
				return nil, fmt.Errorf("shade fault %s: %w", f.Name, err)
			}
			poly.Color = color.NRGBA{R: 230, G: 80, B: 60, A: 55}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
	}
	p.X.Min, p.X.Max = 0, end
	for i, l := range lines {
		if len(l.xys) == 0 {
			continue
		}
		ln, err := plotter.NewLine(l.xys)
		if err != nil {
			return nil, fmt.Errorf("line %s: %w", l.name, err)
		}
		ln.Color = plotutil.Color(i)
		if l.dashed {
			ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(ln)
		p.Legend.Add(l.name, ln)
	}
	wt, err := p.WriterTo(plotWidth, plotHeight, "svg")
	if err != nil {
		return nil, fmt.Errorf("svg canvas: %w", err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write svg: %w", err)
	}
	return buf.Bytes(), nil
}

type namedLine struct {
	name   string
	xys    plotter.XYs
	dashed bool
}

// maxPlotGroups bounds the points a plotted line keeps: a longer line is
// cut into this many runs of consecutive seconds, each drawn by its
// lowest and highest point (in time order), so that a spike or a dip of
// one second still shows while rendering costs the same after 10 minutes
// as after 1 hour (the console keeps maxPoints seconds).
const maxPlotGroups = 200

func series(points []Point, get func(Point) (float64, bool)) plotter.XYs {
	var all plotter.XYs
	for _, pt := range points {
		if v, ok := get(pt); ok {
			all = append(all, plotter.XY{X: pt.T, Y: v})
		}
	}
	return decimate(all, maxPlotGroups)
}

// decimate keeps, of each of at most groups runs of consecutive points,
// the lowest and the highest, in time order; xys with at most 2*groups
// points is returned as it is.
func decimate(xys plotter.XYs, groups int) plotter.XYs {
	if len(xys) <= 2*groups {
		return xys
	}
	size := (len(xys) + groups - 1) / groups
	out := make(plotter.XYs, 0, 2*groups)
	for i := 0; i < len(xys); i += size {
		g := xys[i:min(i+size, len(xys))]
		lo, hi := 0, 0
		for j, p := range g {
			if p.Y < g[lo].Y {
				lo = j
			}
			if p.Y > g[hi].Y {
				hi = j
			}
		}
		switch {
		case lo == hi:
			out = append(out, g[lo])
		case lo < hi:
			out = append(out, g[lo], g[hi])
		default:
			out = append(out, g[hi], g[lo])
		}
	}
	return out
}

func streamNames(points []Point) []string {
	seen := map[string]bool{}
	for _, pt := range points {
		for s := range pt.Streams {
			seen[s] = true
		}
	}
	return sortedKeys(seen)
}

func serviceNames(points []Point) []string {
	seen := map[string]bool{}
	for _, pt := range points {
		for s := range pt.Ready {
			seen[s] = true
		}
	}
	return sortedKeys(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
