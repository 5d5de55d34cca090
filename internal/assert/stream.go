package assert

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// streamSeries finds the named stream's series. It sets an Error verdict
// on r and returns nil when the assertion names no stream or the stream
// was not measured.
func streamSeries(in *input, a scenario.Assertion, r *Result) *measure.Series {
	if a.Stream == "" {
		setError(r, "%s assertion needs a stream", a.Type)
		return nil
	}
	s, ok := in.series[a.Stream]
	if !ok || s == nil {
		setError(r, "no measurements for stream %q; streams measured: %s", a.Stream, knownNames(in.series))
		return nil
	}
	return s
}

// streamWindow merges the named stream's buckets over [from, to). It sets
// an Error verdict on r and returns nil when the stream is missing or has
// no completed requests there.
func streamWindow(in *input, a scenario.Assertion, r *Result, from, to time.Duration, what string) *measure.Bucket {
	s := streamSeries(in, a, r)
	if s == nil {
		return nil
	}
	b := s.Window(from, to)
	if b.Requests == 0 {
		setError(r, "stream %q completed no requests in %s [%s, %s): it sent nothing there (it did not run then, or its load stopped), so there is nothing to judge",
			a.Stream, what, FormatOffset(from), FormatOffset(to))
		return nil
	}
	return b
}

// StreamStats summarises one bucket (usually a merged window) for reports.
type StreamStats struct {
	// Requests completed; Intended by the schedule.
	Requests, Intended int64
	// Rate is completed requests per second of the window (req/s).
	Rate float64
	// P50..Max are latencies from the intended send time.
	P50, P90, P99, Max time.Duration
	// Failures are transport errors plus status >= 400; ErrorRate is
	// Failures/Requests (0..1).
	Failures  int64
	ErrorRate float64
	// Shed counts shed responses (503/429).
	Shed int64
}

// Stats summarises b over its Width.
func Stats(b *measure.Bucket) StreamStats {
	s := StreamStats{Requests: b.Requests, Intended: b.Intended, Failures: b.Failures()}
	if b.Shed != nil {
		s.Shed = b.Shed.TotalCount()
	}
	if b.Width > 0 {
		s.Rate = float64(b.Requests) / b.Width.Seconds()
	}
	if b.Requests > 0 {
		s.ErrorRate = float64(s.Failures) / float64(b.Requests)
	}
	s.P50 = measure.Quantile(b.Latency, 50)
	s.P90 = measure.Quantile(b.Latency, 90)
	s.P99 = measure.Quantile(b.Latency, 99)
	s.Max = measure.Quantile(b.Latency, 100)
	return s
}

// latencyExtra returns the usual percentiles of b as secondary figures.
func latencyExtra(b *measure.Bucket) []Figure {
	s := Stats(b)
	return []Figure{
		durFigure("p50", s.P50), durFigure("p90", s.P90), durFigure("p99", s.P99), durFigure("max", s.Max),
		countFigure("requests", int(s.Requests), "request"),
	}
}

// judgeLatency compares the stream's latency percentile (default p99)
// over the window's merged buckets with MaxLatency. Latency counts from
// the intended send time and includes failed requests.
func judgeLatency(in *input, a scenario.Assertion, r *Result) {
	if a.MaxLatency == nil {
		setError(r, "latency assertion needs maxLatency")
		return
	}
	pct := 99.0
	if a.Percentile != nil {
		pct = float64(*a.Percentile)
	}
	r.Bound = fmt.Sprintf("%s <= %s", scenario.Percentile(pct), FormatDuration(a.MaxLatency.D()))
	b := streamWindow(in, a, r, in.win.Start, in.win.End, r.Window)
	if b == nil {
		return
	}
	v := measure.Quantile(b.Latency, pct)
	r.Figure = durFigure("", v)
	r.Extra = latencyExtra(b)
	r.Verdict = verdict(v <= a.MaxLatency.D())
	r.Message = fmt.Sprintf("%s %s of %s over %d requests in %s; bound %s",
		a.Stream, scenario.Percentile(pct), FormatDuration(v), b.Requests, r.Window, r.Bound)
}

// Status classes of the error-rate assertion.
const (
	Class5xx    = "5xx"     // responses 500-599
	Class4xx    = "4xx"     // responses 400-499
	ClassErrors = "errors"  // transport errors (no response: timeout, refused, reset)
	ClassNon2xx = "non-2xx" // everything but a 2xx response, transport errors included
	ClassAny    = "any"     // transport errors plus status >= 400 (default)
)

// classCount counts b's completed requests in a status class.
func classCount(b *measure.Bucket, class string) (int64, bool) {
	var n int64
	transport := int64(0)
	for _, c := range b.Errors {
		transport += c
	}
	switch class {
	case Class5xx, Class4xx:
		lo := 500
		if class == Class4xx {
			lo = 400
		}
		for code, c := range b.Codes {
			if code >= lo && code < lo+100 {
				n += c
			}
		}
	case ClassErrors:
		n = transport
	case ClassNon2xx:
		n = transport
		for code, c := range b.Codes {
			if code < 200 || code > 299 {
				n += c
			}
		}
	case ClassAny, "":
		n = b.Failures()
	default:
		return 0, false
	}
	return n, true
}

// judgeErrorRate compares the share of the window's completed requests in
// StatusClass (default any: transport errors plus status >= 400) with
// MaxRate (0..1).
func judgeErrorRate(in *input, a scenario.Assertion, r *Result) {
	if a.MaxRate == nil {
		setError(r, "error-rate assertion needs maxRate")
		return
	}
	class := a.StatusClass
	if class == "" {
		class = ClassAny
	}
	r.Bound = "<= " + FormatPercent(*a.MaxRate)
	b := streamWindow(in, a, r, in.win.Start, in.win.End, r.Window)
	if b == nil {
		return
	}
	n, ok := classCount(b, class)
	if !ok {
		setError(r, "unknown status class %q; available: %s, %s, %s, %s, %s", class, Class4xx, Class5xx, ClassAny, ClassErrors, ClassNon2xx)
		return
	}
	rate := float64(n) / float64(b.Requests)
	r.Figure = ratioFigure("", rate, fmt.Sprintf("%s (%d/%d)", FormatPercent(rate), n, b.Requests))
	r.Verdict = verdict(rate <= *a.MaxRate)
	r.Message = fmt.Sprintf("%s error rate (%s) %s in %s; bound %s%s",
		a.Stream, class, r.Figure.Text, r.Window, r.Bound, breakdown(b))
}

// breakdown lists non-2xx codes and transport errors: "; 503: 12, timeout: 3".
func breakdown(b *measure.Bucket) string {
	var parts []string
	var codes []int
	for c, n := range b.Codes {
		if (c < 200 || c > 299) && n > 0 {
			codes = append(codes, c)
		}
	}
	sort.Ints(codes)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, b.Codes[c]))
	}
	var kinds []string
	for k, n := range b.Errors {
		if n > 0 {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s: %d", k, b.Errors[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// judgeThroughput compares completed/intended requests over the window
// with MinRatio (default 0.995): an open-model schedule that could not be
// carried out shows here.
func judgeThroughput(in *input, a scenario.Assertion, r *Result) {
	min := scenario.DefaultMinRatio
	if a.MinRatio != nil {
		min = *a.MinRatio
	}
	r.Bound = ">= " + FormatRatio(min)
	s := streamSeries(in, a, r)
	if s == nil {
		return
	}
	b := s.Window(in.win.Start, in.win.End)
	if b.Intended == 0 {
		setError(r, "stream %q intended no requests in %s: nothing to judge", a.Stream, r.Window)
		return
	}
	ratio := float64(b.Requests) / float64(b.Intended)
	secs := (in.win.End - in.win.Start).Seconds()
	r.Figure = ratioFigure("", ratio, fmt.Sprintf("%s (%d/%d)", FormatRatio(ratio), b.Requests, b.Intended))
	if secs > 0 {
		r.Extra = []Figure{
			{Name: "achieved", Value: round(float64(b.Requests)/secs, 3), Unit: "req/s", Text: fmt.Sprintf("%.1f/s", float64(b.Requests)/secs)},
			{Name: "intended", Value: round(float64(b.Intended)/secs, 3), Unit: "req/s", Text: fmt.Sprintf("%.1f/s", float64(b.Intended)/secs)},
		}
	}
	r.Verdict = verdict(ratio >= min)
	r.Message = fmt.Sprintf("%s achieved %s of its intended requests in %s; bound %s", a.Stream, r.Figure.Text, r.Window, r.Bound)
}

// judgeShed compares the latency percentile (default p99) of the stream's
// shed responses (measure records 503 and 429 as shed) with MaxLatency and,
// when RetryAfter is true, requires every shed response to have carried
// Retry-After. A window with no shed responses fails: the assertion claims
// the service sheds, and nothing was shed.
func judgeShed(in *input, a scenario.Assertion, r *Result) {
	if a.MaxLatency == nil && (a.RetryAfter == nil || !*a.RetryAfter) {
		setError(r, "shed assertion needs maxLatency or retryAfter: true")
		return
	}
	statuses := a.Status
	if len(statuses) == 0 {
		statuses = scenario.DefaultShedStatus
	}
	for _, s := range statuses {
		if s != 503 && s != 429 {
			setError(r, "shed latency is measured for 503 and 429 responses only, not %d", s)
			return
		}
	}
	pct := 99.0
	if a.Percentile != nil {
		pct = float64(*a.Percentile)
	}
	var bounds []string
	if a.MaxLatency != nil {
		bounds = append(bounds, fmt.Sprintf("%s <= %s", scenario.Percentile(pct), FormatDuration(a.MaxLatency.D())))
	}
	wantRA := a.RetryAfter != nil && *a.RetryAfter
	if wantRA {
		bounds = append(bounds, "Retry-After on every shed response")
	}
	r.Bound = strings.Join(bounds, ", ")
	b := streamWindow(in, a, r, in.win.Start, in.win.End, r.Window)
	if b == nil {
		return
	}
	var byStatus int64
	var parts []string
	for _, s := range statuses {
		byStatus += b.Codes[s]
		parts = append(parts, fmt.Sprintf("%d: %d", s, b.Codes[s]))
	}
	shed := b.Shed.TotalCount()
	if shed == 0 {
		r.Verdict = Fail
		r.Figure = Figure{Unit: "ms", Text: "nothing shed"}
		r.Message = fmt.Sprintf("%s had no shed responses (%s) in %s out of %d requests; bound %s",
			a.Stream, strings.Join(parts, ", "), r.Window, b.Requests, r.Bound)
		return
	}
	v := measure.Quantile(b.Shed, pct)
	r.Figure = durFigure("", v)
	r.Extra = []Figure{
		durFigure("max", measure.Quantile(b.Shed, 100)),
		countFigure("shed", int(shed), "response"),
		{Name: "with Retry-After", Value: float64(b.ShedRetryAfter), Unit: "count",
			Text: fmt.Sprintf("%d/%d", b.ShedRetryAfter, shed)},
	}
	ok := a.MaxLatency == nil || v <= a.MaxLatency.D()
	var msg []string
	msg = append(msg, fmt.Sprintf("%s shed %d responses (%s) in %s, %s %s",
		a.Stream, shed, strings.Join(parts, ", "), r.Window, scenario.Percentile(pct), FormatDuration(v)))
	if wantRA {
		missing := shed - b.ShedRetryAfter
		if missing > 0 {
			ok = false
			msg = append(msg, fmt.Sprintf("%d of %d shed responses lacked Retry-After", missing, shed))
			r.Evidence = append(r.Evidence, Evidence{At: in.win.Start,
				Detail: fmt.Sprintf("%d shed responses without Retry-After in %s", missing, r.Window)})
		} else {
			msg = append(msg, "every one carried Retry-After")
		}
	}
	r.Verdict = verdict(ok)
	r.Message = strings.Join(msg, "; ") + "; bound " + r.Bound
}

// judgeIsolation compares the stream's p99 and error rate in the window
// with its own baseline window: p99(window)/p99(baseline) <= MaxP99Ratio
// and errorRate(window) - errorRate(baseline) <= MaxErrorRateDelta (the
// blast radius of a bulkhead, docs/DESIGN.md §9).
func judgeIsolation(in *input, a scenario.Assertion, r *Result) {
	if a.MaxP99Ratio == nil && a.MaxErrorRateDelta == nil {
		setError(r, "isolation assertion needs maxP99Ratio or maxErrorRateDelta")
		return
	}
	var bounds []string
	if a.MaxP99Ratio != nil {
		bounds = append(bounds, fmt.Sprintf("p99 ratio <= %gx", *a.MaxP99Ratio))
	}
	if a.MaxErrorRateDelta != nil {
		bounds = append(bounds, "error-rate delta <= +"+FormatPercent(*a.MaxErrorRateDelta))
	}
	r.Bound = strings.Join(bounds, ", ")
	base, ok := in.plan.Window("baseline")
	if !ok {
		setError(r, "isolation needs a baseline window in the plan")
		return
	}
	bb := streamWindow(in, a, r, base.Start, base.End, "baseline")
	if bb == nil {
		return
	}
	wb := streamWindow(in, a, r, in.win.Start, in.win.End, r.Window)
	if wb == nil {
		return
	}
	bs, ws := Stats(bb), Stats(wb)
	ratio := 0.0
	if bs.P99 > 0 {
		ratio = float64(ws.P99) / float64(bs.P99)
	}
	delta := ws.ErrorRate - bs.ErrorRate
	r.Figure = Figure{Value: round(ratio, 4), Unit: "ratio",
		Text: fmt.Sprintf("p99 %.2fx, error rate %+.3g pp", ratio, delta*100)}
	r.Extra = []Figure{
		durFigure("baseline p99", bs.P99), durFigure("window p99", ws.P99),
		ratioFigure("baseline error rate", bs.ErrorRate, FormatPercent(bs.ErrorRate)),
		ratioFigure("window error rate", ws.ErrorRate, FormatPercent(ws.ErrorRate)),
		ratioFigure("error-rate delta", delta, fmt.Sprintf("%+.3g pp", delta*100)),
	}
	pass := true
	if a.MaxP99Ratio != nil && ratio > *a.MaxP99Ratio {
		pass = false
	}
	if a.MaxErrorRateDelta != nil && delta > *a.MaxErrorRateDelta {
		pass = false
	}
	r.Verdict = verdict(pass)
	r.Message = fmt.Sprintf("%s p99 %s in %s vs %s in baseline (%.2fx); error rate %s vs %s; bound %s",
		a.Stream, FormatDuration(ws.P99), r.Window, FormatDuration(bs.P99), ratio,
		FormatPercent(ws.ErrorRate), FormatPercent(bs.ErrorRate), r.Bound)
}
