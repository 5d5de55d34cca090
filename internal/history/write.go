package history

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/textio"
)

// stamp writes a night's start for tables.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// Report is what drill history prints with -o json.
type Report struct {
	Nights    []Night    `json:"nights"`
	Figures   []Series   `json:"figures"`
	Judgement *Judgement `json:"judgement"`
}

// Series is one figure across nights; Points[i] is nil when night i lacks
// it.
type Series struct {
	Key    Key      `json:"key"`
	Points []*Point `json:"points"`
}

// Build returns the report of nights and their judgement.
func Build(nights []Night, j *Judgement) *Report {
	r := &Report{Nights: nights, Judgement: j, Figures: []Series{}}
	for _, k := range Keys(nights) {
		s := Series{Key: k, Points: make([]*Point, len(nights))}
		for i, n := range nights {
			if p, ok := n.Figures[k]; ok {
				p := p
				s.Points[i] = &p
			}
		}
		r.Figures = append(r.Figures, s)
	}
	return r
}

// ExitCode is 1 when the newest night regressed, else 0.
func (r *Report) ExitCode() int {
	if r.Judgement != nil && r.Judgement.Regressed() {
		return exitcode.AssertionFailed
	}
	return exitcode.OK
}

// WriteJSON writes r as indented JSON to w; it returns the first error.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write history as JSON: %w", err)
	}
	return nil
}

// WriteText writes r for people: the nights, one table per figure with
// each night's value (and verdict for assertions), the judgement of the
// newest night against the baseline median, and a last line "HISTORY: NO
// REGRESSION (exit 0)" or "HISTORY: REGRESSION (exit 1): <first>". It
// returns the first write error.
func WriteText(w io.Writer, r *Report) error {
	ew := &textio.ErrWriter{W: w, What: "write history"}
	n := r.Nights
	fmt.Fprintf(ew, "HISTORY %s  %d nights  %s .. %s\n", n[len(n)-1].Scenario, len(n), stamp(n[0].StartedAt), stamp(n[len(n)-1].StartedAt))
	fmt.Fprintln(ew, "\nNIGHTS")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTARTED\tRUN\tEXIT\tCOMPARABLE\tPATH")
	for i, x := range n {
		c := "yes"
		if !x.Comparable {
			c = "no: " + x.Why
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\n", i+1, stamp(x.StartedAt), x.RunID, x.ExitCode, c, x.Path)
	}
	tw.Flush()
	var old []string
	for i, x := range n {
		if x.LatencyNotRecorded {
			old = append(old, strconv.Itoa(i+1))
		}
	}
	if len(old) > 0 {
		fmt.Fprintf(ew, "  nights %s: latency of successful requests not recorded (records made before drill kept it): no latency figures for their windows in which requests failed\n", strings.Join(old, ", "))
	}
	for _, s := range r.Figures {
		fmt.Fprintf(ew, "\n%s %s\n", s.Key.Section, s.Key)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tSTARTED\tVALUE\tVERDICT")
		for i, p := range s.Points {
			if p == nil {
				continue
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", i+1, stamp(n[i].StartedAt), p.Text, dash(p.Verdict))
		}
		tw.Flush()
	}
	j := r.Judgement
	fmt.Fprintf(ew, "\nJUDGEMENT newest run %s against the median of %d earlier comparable nights\n", j.Newest, len(j.Baseline))
	if j.Note != "" {
		fmt.Fprintf(ew, "  %s\n", j.Note)
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  FIGURE\tMEDIAN\tNEWEST\tDELTA\tJUDGEMENT")
		for _, row := range j.Rows {
			fig := row.Subject
			if row.Window != "" {
				fig += " " + row.Window
			}
			fmt.Fprintf(tw, "  %s %s\t%s\t%s\t%s\t%s\n", fig, row.Figure, row.Base.Text, row.New.Text, dash(row.DeltaText), judgementWord(row.Judgement))
		}
		tw.Flush()
	}
	for _, g := range j.Regressions {
		fmt.Fprintf(ew, "REGRESSED %s\n", g)
	}
	if j.Regressed() {
		fmt.Fprintf(ew, "HISTORY: REGRESSION (exit %d): %s\n", r.ExitCode(), j.Regressions[0])
	} else {
		fmt.Fprintf(ew, "HISTORY: NO REGRESSION (exit %d)\n", r.ExitCode())
	}
	return ew.Err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func judgementWord(j string) string {
	switch j {
	case compare.Regression:
		return "REGRESSION"
	case compare.OK:
		return "ok"
	}
	return "-"
}

// Colours of the trend plots' points.
var (
	colPass    = color.RGBA{R: 0x1a, G: 0x7f, B: 0x37, A: 0xff} // night passed (or assertion passed)
	colFail    = color.RGBA{R: 0xcf, G: 0x22, B: 0x2e, A: 0xff} // assertion failed / night exit 1
	colInvalid = color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff} // not comparable
	colLine    = color.RGBA{R: 0x44, G: 0x66, B: 0xaa, A: 0xff}
	colMedian  = color.RGBA{R: 0xbf, G: 0x87, B: 0x00, A: 0xff}
)

// lineChunk is how many points of a figure's line one stroke draws.
const lineChunk = 32

// plotSeries draws one figure across nights: a line through the values,
// each night's point coloured by its verdict (assertions) or its run's
// outcome (green passed, red failed, grey not comparable), and the
// baseline median dashed when there is one (median < 0: none). It returns
// a PNG data URL.
func plotSeries(s Series, nights []Night, median float64) (string, error) {
	p := plot.New()
	p.Title.Text = s.Key.Section + " " + s.Key.String()
	p.X.Label.Text = "night"
	unit := ""
	var line, never plotter.XYs
	groups := map[color.Color]plotter.XYs{}
	for i, pt := range s.Points {
		if pt == nil {
			continue
		}
		if pt.Value < 0 {
			never = append(never, plotter.XY{X: float64(i + 1)})
			continue
		}
		unit = pt.Unit
		xy := plotter.XY{X: float64(i + 1), Y: pt.Value}
		line = append(line, xy)
		c := colPass
		switch {
		case !nights[i].Comparable:
			c = colInvalid
		case pt.Verdict != "" && pt.Verdict != "pass":
			c = colFail
		case pt.Verdict == "" && nights[i].ExitCode != 0:
			c = colFail
		}
		groups[c] = append(groups[c], xy)
	}
	p.Y.Label.Text = unit
	p.Add(plotter.NewGrid())
	// The line is stroked in pieces of lineChunk points, each sharing its
	// first point with the previous one's last: the rasteriser's cost per
	// stroke grows with the square of the crossings per pixel row, so a
	// year of nights drawn as one path took most of the page's time.
	for start := 0; start < len(line); start += lineChunk - 1 {
		piece := line[start:min(start+lineChunk, len(line))]
		l, err := plotter.NewLine(piece)
		if err != nil {
			return "", fmt.Errorf("plot %s: %w", s.Key, err)
		}
		l.Color, l.Width = colLine, vg.Points(1)
		p.Add(l)
		if start+lineChunk >= len(line) {
			break
		}
	}
	for _, c := range []color.Color{colPass, colFail, colInvalid} {
		if len(groups[c]) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(groups[c])
		if err != nil {
			return "", fmt.Errorf("plot %s: %w", s.Key, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: glyphRadius(4, len(nights)), Shape: draw.CircleGlyph{}}
		p.Add(sc)
		name := map[color.Color]string{colPass: "passed", colFail: "failed", colInvalid: "not comparable"}[c]
		p.Legend.Add(name, sc)
	}
	if median >= 0 && len(nights) > 1 {
		m, err := plotter.NewLine(plotter.XYs{{X: 1, Y: median}, {X: float64(len(nights)), Y: median}})
		if err != nil {
			return "", fmt.Errorf("plot %s: %w", s.Key, err)
		}
		m.Color, m.Dashes = colMedian, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(m)
		p.Legend.Add("baseline median", m)
	}
	if len(never) > 0 {
		// A time that never came is drawn above every value.
		top := p.Y.Max
		if median > top {
			top = median
		}
		if top <= 0 {
			top = 1
		}
		for i := range never {
			never[i].Y = top * 1.1
		}
		sc, err := plotter.NewScatter(never)
		if err != nil {
			return "", fmt.Errorf("plot %s: %w", s.Key, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: colFail, Radius: glyphRadius(5, len(nights)), Shape: draw.TriangleGlyph{}}
		p.Add(sc)
		p.Legend.Add("never / not recovered", sc)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.X.Max = 0.5, float64(len(nights))+0.5
	p.X.Tick.Marker = nightTicks(nights)
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	p.Y.Max *= 1.4
	// Drawn as p.WriterTo would (96 dpi), then PNG-encoded with the
	// fastest compression: the same pixels in a third of the time.
	c := vgimg.New(9*vg.Inch, 2.8*vg.Inch)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, c.Image()); err != nil {
		return "", fmt.Errorf("render plot %s: %w", s.Key, err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// glyphRadius is a night's point radius: pt points for up to 30 nights,
// smaller beyond (down to 1.5 pt) so that a year of nights stays a line
// of points rather than a band.
func glyphRadius(pt float64, nights int) vg.Length {
	if nights > 30 {
		pt = max(1.5, pt*math.Sqrt(30/float64(nights)))
	}
	return vg.Points(pt)
}

// maxTickLabels is how many nights' number and date fit under a plot
// without overlapping.
const maxTickLabels = 8

// nightTicks labels at most maxTickLabels nights, evenly spaced, with
// their number and date, always the first and the newest.
func nightTicks(nights []Night) plot.ConstantTicks {
	n := len(nights)
	if n == 0 {
		return nil
	}
	step := (n + maxTickLabels - 1) / maxTickLabels
	labelled := make([]bool, n)
	for i := 0; i < n; i += step {
		labelled[i] = true
	}
	if last := (n - 1) / step * step; last != n-1 {
		// Off the even spacing, the newest replaces the last evenly spaced
		// label (less than a step before it, it would crowd it).
		if last > 0 {
			labelled[last] = false
		}
		labelled[n-1] = true
	}
	var ticks plot.ConstantTicks
	for i := range n {
		label := ""
		if labelled[i] {
			label = strconv.Itoa(i + 1)
			if !nights[i].StartedAt.IsZero() {
				label += "\n" + nights[i].StartedAt.UTC().Format("01-02 15:04")
			}
		}
		ticks = append(ticks, plot.Tick{Value: float64(i + 1), Label: label})
	}
	return ticks
}

var pageTemplate = template.Must(template.New("history").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>drill history: {{.Scenario}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#1f2328}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;font-size:.9em}
.pass{color:#1a7f37}.fail{color:#cf222e;font-weight:bold}.invalid{color:#8c8c8c}
.verdict{font-size:1.3em;padding:.5em;border-radius:4px}.ok{background:#dafbe1}.bad{background:#ffebe9}
details{margin-bottom:1.5em}img{max-width:100%}
</style></head><body>
<h1>drill history: {{.Scenario}}</h1>
<p class="verdict {{if .Regressed}}bad{{else}}ok{{end}}">{{.Verdict}}</p>
<h2>Nights</h2>
<table><tr><th>#</th><th>started</th><th>run</th><th>exit</th><th>comparable</th><th>faults' outcome</th></tr>
{{range .Nights}}<tr><td>{{.N}}</td><td>{{.Started}}</td><td>{{.RunID}}</td><td class="{{.Class}}">{{.Exit}}</td><td>{{.Comparable}}</td><td>{{.Outcome}}</td></tr>
{{end}}</table>
<h2>Judgement of the newest night</h2>
<p>{{.JudgeNote}}</p>
{{if .Rows}}<table><tr><th>figure</th><th>baseline median</th><th>newest</th><th>delta</th><th>judgement</th></tr>
{{range .Rows}}<tr><td>{{.Figure}}</td><td>{{.Base}}</td><td>{{.New}}</td><td>{{.Delta}}</td><td class="{{.Class}}">{{.Judgement}}</td></tr>
{{end}}</table>{{end}}
<h2>Figures</h2>
{{range .Figures}}<h3>{{.Title}}</h3>
<img alt="{{.Title}} across nights" src="{{.Src}}">
<details><summary>values</summary><table><tr><th>#</th><th>started</th><th>value</th><th>verdict</th></tr>
{{range .Points}}<tr><td>{{.N}}</td><td>{{.Started}}</td><td>{{.Text}}</td><td class="{{.Class}}">{{.Verdict}}</td></tr>
{{end}}</table></details>
{{end}}</body></html>
`))

// WriteHTML writes the trend page of r to w: the nights with their exit
// codes, the judgement table, and one plot per figure with the nights'
// values, verdicts marked, and the baseline median. It returns the first
// plotting or write error.
func WriteHTML(w io.Writer, r *Report) error {
	type nightView struct {
		N                                          int
		Started, RunID, Class, Comparable, Outcome string
		Exit                                       int
	}
	type rowView struct{ Figure, Base, New, Delta, Judgement, Class string }
	type pointView struct {
		N                             int
		Started, Text, Verdict, Class string
	}
	type figView struct {
		Title  string
		Src    template.URL
		Points []pointView
	}
	n := r.Nights
	j := r.Judgement
	v := struct {
		Scenario, Verdict, JudgeNote string
		Regressed                    bool
		Nights                       []nightView
		Rows                         []rowView
		Figures                      []figView
	}{Scenario: n[len(n)-1].Scenario, Regressed: j.Regressed()}
	if j.Regressed() {
		v.Verdict = fmt.Sprintf("REGRESSION (exit %d): %s", r.ExitCode(), j.Regressions[0])
	} else {
		v.Verdict = fmt.Sprintf("NO REGRESSION (exit %d)", r.ExitCode())
	}
	v.JudgeNote = fmt.Sprintf("Newest run %s against the median of %d earlier comparable nights.", j.Newest, len(j.Baseline))
	if j.Note != "" {
		v.JudgeNote += " " + j.Note
	}
	for i, x := range n {
		nv := nightView{N: i + 1, Started: stamp(x.StartedAt), RunID: x.RunID, Exit: x.ExitCode, Comparable: "yes", Class: "pass"}
		if x.ExitCode != 0 {
			nv.Class = "fail"
		}
		if !x.Comparable {
			nv.Comparable, nv.Class = "no: "+x.Why, "invalid"
		}
		nv.Outcome = outcome(x)
		v.Nights = append(v.Nights, nv)
	}
	medians := map[Key]float64{}
	for _, row := range j.Rows {
		fig := row.Subject
		if row.Window != "" {
			fig += " " + row.Window
		}
		rv := rowView{Figure: fig + " " + row.Figure, Base: row.Base.Text, New: row.New.Text, Delta: dash(row.DeltaText), Judgement: judgementWord(row.Judgement)}
		if row.Judgement == compare.Regression {
			rv.Class = "fail"
		}
		v.Rows = append(v.Rows, rv)
	}
	for _, row := range j.Rows {
		for _, s := range r.Figures {
			if s.Key.Subject == row.Subject && s.Key.Window == row.Window && s.Key.Figure == row.Figure {
				medians[s.Key] = row.Base.Value
			}
		}
	}
	srcs, err := plotAll(r.Figures, n, medians)
	if err != nil {
		return err
	}
	for fi, s := range r.Figures {
		fv := figView{Title: s.Key.Section + " " + s.Key.String(), Src: template.URL(srcs[fi])}
		for i, p := range s.Points {
			if p == nil {
				continue
			}
			pv := pointView{N: i + 1, Started: stamp(n[i].StartedAt), Text: p.Text, Verdict: p.Verdict}
			if p.Verdict != "" && p.Verdict != "pass" {
				pv.Class = "fail"
			}
			fv.Points = append(fv.Points, pv)
		}
		v.Figures = append(v.Figures, fv)
	}
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("write history page: %w", err)
	}
	return nil
}

// plotAll draws every figure's plot (see [plotSeries]; medians by key,
// none for a key missing) on up to GOMAXPROCS goroutines, and returns
// their data URLs in figures' order, or the first figure's error in that
// order.
func plotAll(figures []Series, nights []Night, medians map[Key]float64) ([]string, error) {
	srcs := make([]string, len(figures))
	err := forEach(len(figures), func(i int) (err error) {
		med, ok := medians[figures[i].Key]
		if !ok {
			med = -1
		}
		srcs[i], err = plotSeries(figures[i], nights, med)
		return err
	})
	if err != nil {
		return nil, err
	}
	return srcs, nil
}

// outcome says in a few words how a night's faults went, from its
// findings' figures: unroutable time and recovery per fault.
func outcome(x Night) string {
	var parts []string
	for _, k := range x.Order {
		if k.Section != SectionFinding {
			continue
		}
		if k.Figure == "length" || k.Figure == "recovery" {
			parts = append(parts, k.Subject+" "+k.Figure+" "+x.Figures[k].Text)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += "; " + p
	}
	return out
}
