package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/color"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
)

// Plot size in the HTML report.
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 3.6 * vg.Inch
	// maxMetricSeries caps the lines of one metric plot.
	maxMetricSeries = 12
	// maxMetricPlots caps the number of metric families plotted.
	maxMetricPlots = 12
)

// Figure is one rendered plot: a title and a PNG as a data: URL.
type Figure struct {
	Title string
	// DataURL is "data:image/png;base64,...".
	DataURL string
	// Note says what was left out, if anything.
	Note string
}

// span is a shaded time span on a plot (a fault window).
type span struct {
	name     string
	from, to float64 // s
}

// faultSpans returns the run's fault windows, from the event log's
// FaultOn/FaultOff when present, else from the plan.
func faultSpans(run *record.Run) []span {
	on := map[string]time.Duration{}
	var out []span
	for _, e := range run.Events {
		switch e.Kind {
		case event.FaultOn:
			on[e.Fault] = e.At
		case event.FaultOff:
			if t, ok := on[e.Fault]; ok {
				out = append(out, span{e.Fault, t.Seconds(), e.At.Seconds()})
				delete(on, e.Fault)
			}
		}
	}
	end := runEnd(run)
	for f, t := range on { // never turned off in the log
		out = append(out, span{f, t.Seconds(), end.Seconds()})
	}
	if len(out) == 0 && run.Plan != nil {
		for _, w := range run.Plan.Windows {
			if strings.HasPrefix(w.Name, "fault:") {
				out = append(out, span{w.Fault, w.Start.Seconds(), w.End.Seconds()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

func runEnd(run *record.Run) time.Duration {
	if run.Plan != nil && run.Plan.Duration > 0 {
		return run.Plan.Duration
	}
	var end time.Duration
	for _, e := range run.Events {
		if e.At > end {
			end = e.At
		}
	}
	return end
}

// newPlot returns a plot with the house style.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// shade adds the fault spans to p as translucent bands from y0 to y1.
func shade(p *plot.Plot, spans []span, y0, y1 float64) error {
	for i, s := range spans {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: s.from, Y: y0}, {X: s.to, Y: y0}, {X: s.to, Y: y1}, {X: s.from, Y: y1}})
		if err != nil {
			return fmt.Errorf("shade fault %s: %w", s.name, err)
		}
		poly.Color = color.NRGBA{R: 230, G: 80, B: 60, A: 55}
		poly.LineStyle.Width = 0
		poly.LineStyle.Color = color.Transparent
		p.Add(poly)
		if i == 0 {
			p.Legend.Add("fault on", poly)
		}
	}
	return nil
}

// shadeUnroutable adds the unroutable intervals of the run's findings
// (no ready replica in routing) to p as dark bands in the lowest tenth of
// the plot, so they stand out from the fault shading.
func shadeUnroutable(p *plot.Plot, fs []findings.Finding, y1 float64) error {
	first := true
	for _, f := range fs {
		if f.Kind != findings.KindUnroutable || f.End <= f.Start {
			continue
		}
		x0, x1 := f.Start.Seconds(), f.End.Seconds()
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: y1 / 10}, {X: x0, Y: y1 / 10}})
		if err != nil {
			return fmt.Errorf("shade unroutable interval of %s: %w", f.Service, err)
		}
		poly.Color = color.NRGBA{R: 120, G: 20, B: 140, A: 160}
		poly.LineStyle.Width = 0
		poly.LineStyle.Color = color.Transparent
		p.Add(poly)
		if first {
			p.Legend.Add("no ready replica (unroutable)", poly)
			first = false
		}
	}
	return nil
}

// xAxis fixes the time axis of p to [min(0, from), end] s so that every
// plot of a report lines up.
func xAxis(p *plot.Plot, from, end float64) {
	p.X.Min = math.Floor(math.Min(0, from))
	if end > p.X.Min {
		p.X.Max = end
	}
	p.X.Tick.Marker = secondTicks{}
}

// secondTicks are gonum's default ticks labelled without trailing zeros
// ("25", not "25.00").
type secondTicks struct{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// headroom returns the Y axis limits for data in [lo, hi] that leave room
// at the top for a legend of n entries (linear axis from 0, or log axis).
func headroom(lo, hi float64, n int, log bool) (float64, float64) {
	f := 0.07*float64(n) + 0.05
	if f > 0.6 {
		f = 0.6
	}
	if log {
		lo *= 0.8
		decades := math.Log10(hi / lo)
		return lo, hi * math.Pow(10, decades*f/(1-f))
	}
	if hi <= 0 {
		hi = 1
	}
	return 0, hi / (1 - f)
}

// addLine adds a named line with palette color i.
func addLine(p *plot.Plot, name string, i int, xys plotter.XYs, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// render encodes p as a PNG data URL.
func render(p *plot.Plot) (string, error) {
	w, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return "", fmt.Errorf("render plot %q: %w", p.Title.Text, err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("render plot %q: %w", p.Title.Text, err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// yRange returns the min and max of the Y values of the given lines.
func yRange(lines ...plotter.XYs) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for _, p := range l {
			lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
		}
	}
	if math.IsInf(lo, 0) {
		return 0, 1
	}
	return lo, hi
}

// line is one series of a per-second plot, drawn dashed or solid.
type line struct {
	name   string
	xys    plotter.XYs
	dashed bool
}

// seriesFigure finishes a per-second plot: it shades the fault spans over
// [y0, y1], draws lines in order (each in the next palette colour), fixes
// the Y axis to [y0, y1] and the X axis to [0, end] s, and renders the
// figure titled title.
func seriesFigure(p *plot.Plot, title string, spans []span, y0, y1, end float64, lines ...line) (Figure, error) {
	if err := shade(p, spans, y0, y1); err != nil {
		return Figure{}, err
	}
	for i, l := range lines {
		if err := addLine(p, l.name, i, l.xys, l.dashed); err != nil {
			return Figure{}, err
		}
	}
	p.Y.Min, p.Y.Max = y0, y1
	xAxis(p, 0, end)
	url, err := render(p)
	return Figure{Title: title, DataURL: url}, err
}

// latencyPlot plots a stream's per-second p50, p99 and max latency (ms)
// with the fault windows shaded. The Y axis is logarithmic when the
// values span more than two decades.
func latencyPlot(name string, s *measure.Series, spans []span, end float64) (Figure, error) {
	var p50, p99, mx plotter.XYs
	for _, b := range s.Buckets {
		if b.Requests == 0 || b.Latency == nil || b.Latency.TotalCount() == 0 {
			continue
		}
		x := (b.Start + b.Width/2).Seconds()
		p50 = append(p50, plotter.XY{X: x, Y: msf(measure.Quantile(b.Latency, 50))})
		p99 = append(p99, plotter.XY{X: x, Y: msf(measure.Quantile(b.Latency, 99))})
		mx = append(mx, plotter.XY{X: x, Y: msf(measure.Quantile(b.Latency, 100))})
	}
	p := newPlot("latency of "+name+" per second (from intended send time)", "t (s)", "latency (ms)")
	lo, hi := yRange(p50, p99, mx)
	logY := lo > 0 && hi/lo > 100
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text = "latency (ms, log scale)"
	}
	y0, y1 := headroom(lo, hi, 4, logY)
	return seriesFigure(p, "Latency: "+name, spans, y0, y1, end,
		line{"p50", p50, false}, line{"p99", p99, false}, line{"max", mx, true})
}

// ratePlot plots a stream's intended and completed requests per second,
// failures per second and shed responses per second, and 404s per second
// when the stream got any (a gateway with no route: Traefik's answer for
// a service without a healthy server).
func ratePlot(name string, s *measure.Series, spans []span, end float64) (Figure, error) {
	lines := rateLines(s)
	p := newPlot("requests of "+name+" per second", "t (s)", "req/s")
	xys := make([]plotter.XYs, len(lines))
	for i, l := range lines {
		xys[i] = l.xys
	}
	_, hi := yRange(xys...)
	y0, y1 := headroom(0, hi, 5, false)
	return seriesFigure(p, "Throughput: "+name, spans, y0, y1, end, lines...)
}

// rateLines are the lines of [ratePlot].
func rateLines(s *measure.Series) []line {
	var intended, done, failed, shed, notFound plotter.XYs
	any404 := false
	for _, b := range s.Buckets {
		w := b.Width.Seconds()
		if w <= 0 {
			continue
		}
		x := (b.Start + b.Width/2).Seconds()
		intended = append(intended, plotter.XY{X: x, Y: float64(b.Intended) / w})
		done = append(done, plotter.XY{X: x, Y: float64(b.Requests) / w})
		failed = append(failed, plotter.XY{X: x, Y: float64(b.Failures()) / w})
		var n int64
		if b.Shed != nil {
			n = b.Shed.TotalCount()
		}
		shed = append(shed, plotter.XY{X: x, Y: float64(n) / w})
		nf := b.Codes[http.StatusNotFound]
		any404 = any404 || nf > 0
		notFound = append(notFound, plotter.XY{X: x, Y: float64(nf) / w})
	}
	lines := []line{{"intended", intended, true}, {"completed", done, false}, {"failed", failed, false}, {"shed (503/429)", shed, false}}
	if any404 {
		lines = append(lines, line{"not found (404)", notFound, false})
	}
	return lines
}

// readyPlot plots, per service, the replicas ready (Ready condition) and
// the endpoints ready in the Service's slices over time, as step lines.
func readyPlot(run *record.Run, spans []span) (Figure, bool, error) {
	type state struct{ ready, inSlice map[string]bool }
	services := map[string]*state{}
	podSvc := map[string]string{}
	var names []string
	for _, e := range run.Events {
		if e.Service != "" && e.Pod != "" {
			if _, ok := podSvc[e.Pod]; !ok && (e.Kind == event.PodReady || e.Kind == event.PodUnready ||
				e.Kind == event.PodCreated || e.Kind == event.PodStarted) {
				podSvc[e.Pod] = e.Service
			}
		}
	}
	lines := map[string]*[2]plotter.XYs{}
	var xMin float64
	for _, e := range run.Events {
		svc := podSvc[e.Pod]
		if svc == "" {
			continue
		}
		st := services[svc]
		if st == nil {
			st = &state{ready: map[string]bool{}, inSlice: map[string]bool{}}
			services[svc] = st
			lines[svc] = &[2]plotter.XYs{}
			names = append(names, svc)
		}
		switch e.Kind {
		case event.PodReady:
			st.ready[e.Pod] = true
		case event.PodUnready, event.PodStarted, event.PodCreated:
			st.ready[e.Pod] = false
		case event.PodDeleted:
			delete(st.ready, e.Pod)
			delete(st.inSlice, e.Pod)
		case event.EndpointReady:
			st.inSlice[e.Pod] = true
		case event.EndpointNotReady, event.EndpointRemoved:
			st.inSlice[e.Pod] = false
		default:
			continue
		}
		x := e.At.Seconds()
		xMin = math.Min(xMin, x)
		l := lines[svc]
		l[0] = append(l[0], plotter.XY{X: x, Y: float64(count(st.ready))})
		l[1] = append(l[1], plotter.XY{X: x, Y: float64(count(st.inSlice))})
	}
	if len(names) == 0 {
		return Figure{}, false, nil
	}
	sort.Strings(names)
	end := runEnd(run).Seconds()
	p := newPlot("ready replicas (Ready condition) and endpoints ready in the Service", "t (s)", "replicas")
	var hi float64
	for _, svc := range names {
		for k := range lines[svc] {
			l := lines[svc][k]
			if n := len(l); n > 0 && l[n-1].X < end {
				lines[svc][k] = append(l, plotter.XY{X: end, Y: l[n-1].Y})
			}
			_, h := yRange(lines[svc][k])
			hi = math.Max(hi, h)
		}
	}
	_, y1 := headroom(0, hi, 2*len(names)+1, false)
	if err := shade(p, spans, 0, y1); err != nil {
		return Figure{}, false, err
	}
	if err := shadeUnroutable(p, run.Findings, y1); err != nil {
		return Figure{}, false, err
	}
	i := 0
	for _, svc := range names {
		for k, what := range []string{"ready", "in slice"} {
			l, err := plotter.NewLine(lines[svc][k])
			if err != nil {
				return Figure{}, false, fmt.Errorf("plot ready replicas of %s: %w", svc, err)
			}
			l.StepStyle = plotter.PostStep
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			if k == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(svc+" "+what, l)
			i++
		}
	}
	p.Y.Min, p.Y.Max = 0, y1
	p.Y.Tick.Marker = integerTicks(int(hi))
	xAxis(p, xMin, end)
	p.Legend.Left = false
	url, err := render(p)
	return Figure{Title: "Ready replicas", DataURL: url}, true, err
}

// integerTicks labels 0..max (thinned to about ten labels).
func integerTicks(max int) plot.ConstantTicks {
	step := 1
	for max/step > 10 {
		step *= 2
	}
	var t plot.ConstantTicks
	for v := 0; v <= max; v += step {
		t = append(t, plot.Tick{Value: float64(v), Label: fmt.Sprint(v)})
	}
	return t
}

func count(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// metricPlots plots each scraped metric family over time, one line per
// label set. Counters (names ending in _total) are plotted as a per-second
// rate of increase.
func metricPlots(run *record.Run, spans []span) ([]Figure, error) {
	type seriesT struct {
		labels string
		xys    plotter.XYs
	}
	fams := map[string]map[string]*seriesT{}
	for _, e := range run.Events {
		if e.Kind != event.Metric || e.Metric == "" || math.IsNaN(e.Value) || math.IsInf(e.Value, 0) {
			continue
		}
		f := fams[e.Metric]
		if f == nil {
			f = map[string]*seriesT{}
			fams[e.Metric] = f
		}
		key := labelValues(e.Labels)
		s := f[key]
		if s == nil {
			s = &seriesT{labels: key}
			f[key] = s
		}
		s.xys = append(s.xys, plotter.XY{X: e.At.Seconds(), Y: e.Value})
	}
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Figure
	for fi, name := range names {
		if fi >= maxMetricPlots {
			out = append(out, Figure{Title: "More metrics", Note: fmt.Sprintf("%d more metric families not plotted", len(names)-maxMetricPlots)})
			break
		}
		counter := strings.HasSuffix(name, "_total")
		var keys []string
		for k := range fams[name] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		note := ""
		if len(keys) > maxMetricSeries {
			note = fmt.Sprintf("%d of %d series plotted", maxMetricSeries, len(keys))
			keys = keys[:maxMetricSeries]
		}
		var all []plotter.XYs
		for _, k := range keys {
			xys := fams[name][k].xys
			if counter {
				xys = rate(xys)
			}
			fams[name][k].xys = xys
			all = append(all, xys)
		}
		title, unit := name, "value"
		if counter {
			title, unit = name+" (rate of increase)", "per second"
		}
		p := newPlot(title, "t (s)", unit)
		_, hi := yRange(all...)
		y0, y1 := headroom(0, hi, len(keys)+1, false)
		if err := shade(p, spans, y0, y1); err != nil {
			return nil, err
		}
		for i, k := range keys {
			label := k
			if label == "" {
				label = name
			}
			if err := addLine(p, label, i, fams[name][k].xys, false); err != nil {
				return nil, err
			}
		}
		p.Y.Min, p.Y.Max = y0, y1
		xAxis(p, 0, runEnd(run).Seconds())
		p.Legend.Left = false
		url, err := render(p)
		if err != nil {
			return nil, err
		}
		out = append(out, Figure{Title: "Metric: " + name, DataURL: url, Note: note})
	}
	return out, nil
}

// rate turns counter samples into per-second increases; a counter reset
// (a drop) counts from zero.
func rate(xys plotter.XYs) plotter.XYs {
	var out plotter.XYs
	for i := 1; i < len(xys); i++ {
		dt := xys[i].X - xys[i-1].X
		if dt <= 0 {
			continue
		}
		d := xys[i].Y - xys[i-1].Y
		if d < 0 {
			d = xys[i].Y
		}
		out = append(out, plotter.XY{X: xys[i].X, Y: d / dt})
	}
	return out
}

// labelValues names a series by its label values in key order
// ("payment-core-0 tax_calc"): short enough for a legend.
func labelValues(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = l[k]
	}
	return strings.Join(parts, " ")
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Figures renders every plot of the HTML report: latency and throughput
// per stream, ready replicas, and each metric family.
func Figures(run *record.Run) ([]Figure, error) {
	spans := faultSpans(run)
	var out []Figure
	var streams []string
	for n := range run.Series {
		streams = append(streams, n)
	}
	sort.Strings(streams)
	for _, n := range streams {
		s := run.Series[n]
		if s == nil {
			continue
		}
		f, err := latencyPlot(n, s, spans, runEnd(run).Seconds())
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		f, err = ratePlot(n, s, spans, runEnd(run).Seconds())
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	f, ok, err := readyPlot(run, spans)
	if err != nil {
		return nil, err
	}
	if ok {
		out = append(out, f)
	}
	ms, err := metricPlots(run, spans)
	if err != nil {
		return nil, err
	}
	return append(out, ms...), nil
}
