package findings

import (
	"fmt"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/scenario"
)

// failureKinds splits a window's failures by how they failed.
type failureKinds struct {
	requests, failed int64
	// shedService: 503 or 429 answered by the service itself.
	shedService int64
	// noEndpoint: the Service's own 503 with no ready endpoint, or, for a
	// Service that balances per connection, a connection it refused then.
	noEndpoint int64
	// perConn: the stream's Service balances per connection (it refuses
	// connections when no endpoint is ready; its 503s are the replicas').
	perConn    bool
	badGateway int64 // 502: the Service could not reach the chosen replica
	// traefik: the stream's service is routed by the real Traefik of a
	// compose run (routing read from its access log); noRouter counts its
	// 404s in seconds it had dropped the service's routers.
	traefik  bool
	noRouter int64
	// traefikCounted: noRouter and the no-server 5xx are Traefik's access
	// log counts, not attributed by time.
	traefikCounted bool
	// marked: drill's local Service marked its own answers and the
	// generator counted them (measure.ServiceAnswerHeader): they are told
	// apart by who answered, not by time. byLocal counts them all.
	marked     bool
	byLocal    int64
	timeouts   int64
	connection int64 // refused or reset before a response
	other      int64 // any other status >= 400 or transport error
}

// classify counts a stream's failures over [from, to) by kind. Behind
// drill's local Service balancing per request, each answer the Service gave
// itself is known by its marker header ([measure.Bucket.ServiceAnswers]):
// its 503 (no ready endpoint) and 502 (replica unreachable) are counted as
// the Service's, every other status as the replicas'. Where no such count
// exists (a load balancer drill does not run, or a record made before the
// generator counted them), a second whose middle falls in an interval with
// no ready endpoint counts its 503s as the Service's "no endpoint" answer
// and every 502 is taken for the Service's (buckets are per intended
// second, so attribution is to the second).
func (c *ctx) classify(stream string, from, to time.Duration) failureKinds {
	var k failureKinds
	s := c.in.Series[stream]
	if s == nil {
		return k
	}
	svc := c.serviceOf(stream)
	unroutable := c.unroute[svc]
	k.perConn = c.perConnection(svc)
	local := c.routes[svc].Source == routing.LocalService && !k.perConn
	k.traefik = c.routes[svc].Source == routing.TraefikAccessLog
	// Behind Traefik, its access log counted the requests it answered
	// itself per second (traefik.MetricNoRouter, MetricNoServer): those
	// counts, not the time, say which 404s and 5xx were Traefik's.
	var logged404, logged5xx int64
	counted := false
	if k.traefik {
		for _, e := range c.events {
			if e.Kind != event.Metric || e.Service != svc || e.At < from || e.At >= to {
				continue
			}
			switch e.Metric {
			case event.MetricTraefikNoRouter:
				logged404 += int64(e.Value)
				counted = true
			case event.MetricTraefikNoServer:
				logged5xx += int64(e.Value)
				counted = true
			}
		}
	}
	var got404, got500, got503 int64
	for _, b := range s.Buckets {
		if !b.Within(from, to) {
			continue
		}
		k.requests += b.Requests
		k.failed += b.Failures()
		mid := b.Start + b.Width/2
		inU := false
		for _, iv := range unroutable {
			if mid >= iv.Start && mid < iv.End {
				inU = true
				break
			}
		}
		marked := local && b.ServiceAnswersCounted
		if marked {
			k.marked = true
			for code, n := range b.ServiceAnswers {
				k.byLocal += n
				switch code {
				case 503:
					k.noEndpoint += n
				case 502:
					k.badGateway += n
				default:
					k.other += n
				}
			}
		}
		for code, n := range b.Codes {
			if marked {
				n -= b.ServiceAnswers[code] // what the replicas answered
			}
			switch {
			case k.traefik && counted && code == 404:
				got404 += n
			case k.traefik && counted && code == 500:
				got500 += n
			case k.traefik && counted && code == 503:
				got503 += n
			case code == 404 && inU && k.traefik:
				k.noRouter += n
			case (code == 503 || code == 500 && k.traefik) && inU && !k.perConn && !marked:
				k.noEndpoint += n
			case code == 503 || code == 429:
				k.shedService += n
			case code == 502 && !marked:
				k.badGateway += n
			case code >= 400:
				k.other += n
			}
		}
		for kind, n := range b.Errors {
			switch {
			case kind == measure.ErrTimeout:
				k.timeouts += n
			case kind == measure.ErrRefused && inU && k.perConn:
				k.noEndpoint += n
			case measure.ConnectionLevel(kind):
				k.connection += n
			default:
				k.other += n
			}
		}
	}
	if counted {
		// Traefik's own answers as its log counted them; the client's
		// 404s, 500s and 503s beyond those (the service's own, or across a
		// second's edge) are the service's: 503 shed, the rest other.
		// Traefik v3.6.12's no-server answer is 500, so its count claims
		// 500s first.
		k.noRouter = min(got404, logged404)
		c500 := min(got500, logged5xx)
		c503 := min(got503, logged5xx-c500)
		k.noEndpoint += c500 + c503
		k.shedService += got503 - c503
		k.other += got404 - k.noRouter + got500 - c500
		k.traefikCounted = true
	}
	return k
}

// text lists the non-zero kinds, largest first as written.
func (k failureKinds) text() string {
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, thousands(n)+" "+what)
		}
	}
	add(k.shedService, "shed with 503/429 by the service")
	switch {
	case k.traefik:
		add(k.noRouter, "answered 404 by Traefik (no router: its Docker provider dropped the container)")
		add(k.noEndpoint, "answered 500/503 by Traefik itself (no server: allowEmptyServices kept the service without one)")
	case k.marked:
		add(k.noEndpoint, "answered 503 by the local Service (no ready endpoint)")
		add(k.badGateway, "answered 502 by the local Service (replica unreachable)")
	case k.perConn:
		add(k.noEndpoint, "refused by the Service (no ready endpoint for a new connection)")
	default:
		add(k.noEndpoint, "answered 503 by the Service (no ready endpoint)")
	}
	if !k.marked {
		add(k.badGateway, "answered 502 by the Service (replica unreachable)")
	}
	add(k.timeouts, "timeouts")
	add(k.connection, "connection errors")
	add(k.other, "other errors")
	s := strings.Join(parts, ", ")
	if k.traefikCounted && s != "" {
		s += "; Traefik's own answers as its access log counted them"
	}
	if k.marked && k.byLocal > 0 {
		// Counted by the marker on each answer, not by time.
		s += fmt.Sprintf("; drill's local Service answered %s of them itself", thousands(k.byLocal))
	}
	return s
}

func (k failureKinds) figures() []Figure {
	f := []Figure{
		countFigure("requests", k.requests), countFigure("failed", k.failed),
		countFigure("shed-by-service", k.shedService), countFigure("no-endpoint-503", k.noEndpoint),
		countFigure("bad-gateway-502", k.badGateway), countFigure("timeouts", k.timeouts),
		countFigure("connection-errors", k.connection), countFigure("other-errors", k.other),
	}
	if k.marked {
		f = append(f, countFigure("answered-by-local-service", k.byLocal))
	}
	if k.traefik {
		f = append(f, countFigure("no-router-404", k.noRouter))
	}
	return f
}

// perConnection reports whether the local Service named svc balances per
// connection (services[].balancing: connection).
func (c *ctx) perConnection(svc string) bool {
	if c.in.Scenario == nil || svc == "" {
		return false
	}
	for _, s := range c.in.Scenario.Services {
		if s.Name == svc {
			return s.Balancing == scenario.BalancingConnection
		}
	}
	return false
}

// firstFailure returns the start of the first second at or after from
// (and before to) in which a request of stream failed.
func (c *ctx) firstFailure(stream string, from, to time.Duration) (time.Duration, bool) {
	s := c.in.Series[stream]
	if s == nil {
		return 0, false
	}
	for _, b := range s.Buckets {
		if b.Start+b.Width <= from || b.Start >= to {
			continue
		}
		if b.Failures() > 0 {
			return b.Start, true
		}
	}
	return 0, false
}

// shedding reports, for one stream and one fault, how requests failed
// during the fault and in its recovery window.
func (c *ctx) shedding(stream string, f faultSpan) []Finding {
	var out []Finding
	for _, w := range []struct {
		name     string
		from, to time.Duration
		phrase   string
	}{
		{"fault:" + f.name, f.on, f.off, "during " + f.name},
		{"recovery:" + f.name, f.off, f.recEnd, "after " + f.name},
	} {
		if w.to <= w.from {
			continue
		}
		// Buckets are whole seconds of intended send time: a bucket
		// belongs to the window its start lies in.
		k := c.classify(stream, w.from.Truncate(time.Second), w.to.Truncate(time.Second))
		if k.requests == 0 {
			continue
		}
		fd := Finding{Kind: KindShedding, Severity: Info, Stream: stream, Fault: f.name, Start: w.from, End: w.to, Figures: k.figures()}
		if k.failed == 0 {
			fd.Text = fmt.Sprintf("%s %s (%s-%s s): none of %s requests failed", stream, w.phrase, at(w.from), trimT(at(w.to)), thousands(k.requests))
		} else {
			fd.Text = fmt.Sprintf("%s %s (%s-%s s): %s of %s requests failed (%s): %s",
				stream, w.phrase, at(w.from), trimT(at(w.to)), thousands(k.failed), thousands(k.requests),
				assert.FormatPercent(float64(k.failed)/float64(k.requests)), k.text())
			if t, ok := c.firstFailure(stream, w.from, w.to); ok {
				fd.Text += fmt.Sprintf("; first failures due in t=%d-%d s", int(t.Seconds()), int(t.Seconds())+1)
				fd.Figures = append(fd.Figures, secFigure("first-failure", t-w.from))
			}
		}
		out = append(out, fd)
	}
	return out
}

// baseline returns the stream's baseline bucket (nil without one).
func (c *ctx) baseline(stream string) *measure.Bucket {
	w, ok := c.in.Plan.Window("baseline")
	if !ok {
		return nil
	}
	b := c.window(stream, w.Start, w.End)
	if b.Requests == 0 {
		return nil
	}
	return b
}

// nextOn is when the next fault after f's end turns on (or the run's
// end). A fault that began while f was on is not "next": it began before
// f ended.
func (c *ctx) nextOn(f faultSpan) time.Duration {
	next := c.end
	for _, g := range c.faults {
		if g.name != f.name && g.on >= f.off && g.on < next {
			next = g.on
		}
	}
	return next
}

// stillOn names another fault still on when f ended ("" if none): the
// stream's recovery after f cannot be told from that fault's effect.
func (c *ctx) stillOn(f faultSpan) string {
	for _, g := range c.faults {
		if g.name != f.name && g.on <= f.off && g.off > f.off {
			return g.name
		}
	}
	return ""
}

// recovery reports fault off -> the stream's error rate back to the
// baseline's level and its p99 within a factor of the baseline's, both
// held for the hold time (docs/DESIGN.md §10), searched until the next
// fault or the run's end. A fault that ends while another is still on has
// no recovery finding of its own: the one that ends last reports it.
func (c *ctx) recovery(stream string, f faultSpan) []Finding {
	base := c.baseline(stream)
	if base == nil || f.off >= c.end || c.stillOn(f) != "" {
		return nil
	}
	o := c.opt
	baseErr := float64(base.Failures()) / float64(base.Requests)
	baseP99 := measure.Quantile(base.Latency, 99)
	maxP99 := time.Duration(float64(baseP99) * o.RecoveryP99Factor)
	if maxP99 < baseP99+recoveryP99Slack {
		maxP99 = baseP99 + recoveryP99Slack
	}
	maxErr := baseErr + o.RecoveryErrorDelta
	limit := c.nextOn(f)
	fd := Finding{Kind: KindRecovery, Severity: Info, Stream: stream, Fault: f.name, Start: f.off}
	cond := fmt.Sprintf("error rate <= %s and p99 <= %s (baseline %s, %s), held %s",
		assert.FormatPercent(maxErr), assert.FormatDuration(maxP99), assert.FormatPercent(baseErr), assert.FormatDuration(baseP99),
		seconds(o.RecoveryHold))
	for t := f.off.Truncate(time.Second); t+o.RecoveryHold <= limit; t += time.Second {
		b := c.window(stream, t, t+o.RecoveryHold)
		if b.Requests == 0 {
			continue
		}
		er := float64(b.Failures()) / float64(b.Requests)
		p99 := measure.Quantile(b.Latency, 99)
		if er <= maxErr && p99 <= maxP99 {
			d := t - f.off
			if d < 0 {
				d = 0
			}
			fd.End = t
			fd.Figures = []Figure{secFigure("recovery", d), ratioFigure("error-rate", er), secFigure("p99", p99),
				ratioFigure("baseline-error-rate", baseErr), secFigure("baseline-p99", baseP99)}
			fd.Text = fmt.Sprintf("%s recovered %s after %s ended (from %s s: %s)", stream, seconds(d), f.name, at(t), cond)
			return []Finding{fd}
		}
	}
	fd.Severity, fd.Rule = Warning, RuleNotRecovered
	fd.End = limit
	fd.Figures = []Figure{{Name: "recovery", Value: -1, Unit: "s", Text: "not recovered"},
		ratioFigure("baseline-error-rate", baseErr), secFigure("baseline-p99", baseP99)}
	fd.Text = fmt.Sprintf("%s had not recovered %s after %s ended (by %s s; recovered means %s)",
		stream, seconds(limit-f.off), f.name, at(limit), cond)
	return []Finding{fd}
}

// errorsByPhase reports a stream's failures before, during and after a
// fault, and the share of them that came after it ended.
func (c *ctx) errorsByPhase(stream string, f faultSpan) []Finding {
	prevOff := c.in.Plan.Warmup
	for _, g := range c.faults {
		if g.off <= f.on && g.off > prevOff {
			prevOff = g.off
		}
	}
	sec := func(d time.Duration) time.Duration { return d.Truncate(time.Second) }
	before := c.window(stream, sec(prevOff), sec(f.on))
	during := c.window(stream, sec(f.on), sec(f.off))
	after := c.window(stream, sec(f.off), sec(c.nextOn(f)))
	nb, nd, na := before.Failures(), during.Failures(), after.Failures()
	total := nb + nd + na
	fd := Finding{Kind: KindErrors, Severity: Info, Stream: stream, Fault: f.name, Start: f.on, End: f.off,
		Figures: []Figure{countFigure("before", nb), countFigure("during", nd), countFigure("after", na)}}
	if total == 0 {
		fd.Text = fmt.Sprintf("%s: no request failed before, during or after %s", stream, f.name)
		return []Finding{fd}
	}
	share := float64(na) / float64(total)
	fd.Figures = append(fd.Figures, ratioFigure("share-after", share))
	fd.Text = fmt.Sprintf("%s errors around %s: %s before, %s during, %s after it ended (%s of them after)",
		stream, f.name, thousands(nb), thousands(nd), thousands(na), assert.FormatPercent(share))
	switch {
	case na > nd:
		fd.Severity, fd.Rule = Warning, RuleErrorsAfter
		fd.Text += ": more errors after the fault than during it"
	case na > 0:
		fd.Severity, fd.Rule = Notice, RuleSomeErrorsAfter
	}
	return []Finding{fd}
}
