package findings

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/routing"
)

// lateDetectionMargin: a first replica going unready within the fault's
// last second counts as routing that did not react while the fault lasted
// (it protected nothing; the fault's on and off events themselves carry
// tens of ms of scheduling noise).
const lateDetectionMargin = time.Second

// detection reports fault on -> first and last replica of service seen
// unready, in seconds and readiness periods (docs/DESIGN.md §10). Unready
// events are looked for from the fault's start to the end of its recovery
// window: a reaction that came only after the fault ended still counts,
// and is a warning (the routing never reacted while the fault lasted).
func (c *ctx) detection(f faultSpan, service string) []Finding {
	un := routing.Unready(c.events, service, f.on, f.recEnd)
	fd := Finding{Kind: KindDetection, Severity: Info, Service: service, Fault: f.name, Start: f.on, End: f.off}
	first, last, ok := routing.FirstLast(un)
	if !ok {
		fd.Text = fmt.Sprintf("%s stayed ready through %s (no replica went unready from %s to %s s)",
			service, f.name, at(f.on), trimT(at(f.recEnd)))
		fd.Figures = []Figure{{Name: "detection", Value: -1, Unit: "s", Text: "never"}}
		return []Finding{fd}
	}
	total := len(c.routes[service].Pods)
	period := c.readinessPeriod(service)
	periods := func(d time.Duration) string {
		if period <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.1f readiness periods of %s)", d.Seconds()/period.Seconds(), seconds(period))
	}
	dFirst, dLast := first-f.on, last-f.on
	fd.Figures = []Figure{secFigure("detection-first", dFirst), secFigure("detection-last", dLast),
		countFigure("replicas-unready", int64(len(un)))}
	if period > 0 {
		fd.Figures = append(fd.Figures, Figure{Name: "detection-first-periods", Value: roundTo(dFirst.Seconds()/period.Seconds(), 2),
			Unit: "periods", Text: fmt.Sprintf("%.1f", dFirst.Seconds()/period.Seconds())})
	}
	who := fmt.Sprintf("%d of %d replicas", len(un), total)
	if first >= f.off-lateDetectionMargin {
		fd.Severity, fd.Rule = Warning, RuleLateDetection
		var rel string
		switch d := first - f.off; {
		case d > -50*time.Millisecond && d < 50*time.Millisecond:
			rel = "as it ended"
		case d > 0:
			rel = seconds(d) + " after it ended"
		default:
			rel = seconds(-d) + " before it ended"
		}
		fd.Text = fmt.Sprintf("%s's readiness did not react while %s lasted (%s): the first replica went unready %s after it began%s, "+
			"%s; %s unready within %s",
			service, f.name, seconds(f.length()), seconds(dFirst), periods(dFirst), rel, who, seconds(dLast))
		return []Finding{fd}
	}
	fd.Text = fmt.Sprintf("%s detected %s in %s%s: first replica unready at %s s, %s unready within %s of the fault's start",
		service, f.name, seconds(dFirst), periods(dFirst), at(first), who, seconds(dLast))
	return []Finding{fd}
}

// routingLag reports fault on -> replicas left routing and fault off ->
// back in routing, per replica and for all.
func (c *ctx) routingLag(f faultSpan, service string) []Finding {
	tl := c.routes[service]
	left := tl.Left(f.on, f.recEnd)
	if len(left) == 0 {
		return nil
	}
	backAll := tl.Back(f.off, c.end)
	inAtOff := tl.InAt(f.off)
	back := map[string]time.Duration{}
	gone := deletedPods(c.events, service)
	var never, early, deleted []string
	for pod, t := range left {
		switch {
		case inAtOff[pod] && t < f.off:
			early = append(early, pod) // left and came back while the fault was on
		case deletedAfter(gone, pod, t):
			deleted = append(deleted, pod) // deleted for good: a new pod took its slot
		default:
			if b, ok := backAll[pod]; ok && b >= t {
				back[pod] = b
			} else {
				never = append(never, pod)
			}
		}
	}
	sort.Strings(never)
	sort.Strings(early)
	sort.Strings(deleted)
	lf, ll, _ := routing.FirstLast(left)
	fd := Finding{Kind: KindRoutingLag, Severity: Info, Service: service, Fault: f.name, Start: lf, End: c.end}
	fd.Figures = []Figure{secFigure("left-first", lf-f.on), secFigure("left-last", ll-f.on),
		countFigure("replicas-left", int64(len(left)))}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d replicas of %s left the %s %s after %s began",
		len(left), len(tl.Pods), service, tl.Source, span(lf-f.on, ll-f.on), f.name)
	if bf, bl, ok := routing.FirstLast(back); ok {
		fd.Figures = append(fd.Figures, secFigure("back-first", bf-f.off), secFigure("back-last", bl-f.off),
			countFigure("replicas-back", int64(len(back))))
		fd.End = bl
		verb := "were"
		if len(back) == 1 {
			verb = "was"
		}
		fmt.Fprintf(&b, "; %d %s back %s after it ended", len(back), verb, span(bf-f.off, bl-f.off))
	}
	if len(early) > 0 {
		fmt.Fprintf(&b, "; %s came back while it was still on (%s)", plural(len(early), "replica"), strings.Join(early, ", "))
	}
	if len(deleted) > 0 {
		verb := "were"
		if len(deleted) == 1 {
			verb = "was"
		}
		fmt.Fprintf(&b, "; %s %s deleted and replaced by a new pod (%s)", plural(len(deleted), "replica"), verb, strings.Join(deleted, ", "))
	}
	if len(never) > 0 {
		fd.Severity, fd.Rule = Warning, RuleNotReturned
		fmt.Fprintf(&b, "; %s never came back before the run ended (%s)", plural(len(never), "replica"), strings.Join(never, ", "))
	}
	for _, pod := range tl.Pods {
		if t, ok := left[pod]; ok {
			fd.Figures = append(fd.Figures, secFigure("left:"+pod, t-f.on))
		}
		if t, ok := back[pod]; ok {
			fd.Figures = append(fd.Figures, secFigure("back:"+pod, t-f.off))
		}
	}
	fd.Text = b.String()
	return []Finding{fd}
}

// deletedPods maps each pod of service that was deleted (a PodDeleted
// event: a pod-kill, a rollout, a pod gone from the cluster) to when.
// Such a pod does not come back: a new pod takes its place.
func deletedPods(events []event.Event, service string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, e := range events {
		if e.Kind == event.PodDeleted && e.Service == service {
			out[e.Pod] = e.At
		}
	}
	return out
}

// deletedAfter reports whether pod was deleted at or after t.
func deletedAfter(gone map[string]time.Duration, pod string, t time.Duration) bool {
	at, ok := gone[pod]
	return ok && at >= t
}

// unroutableAfterMargin: no ready replica for less than this after a fault
// ended is the fault's own end (its off event and the replicas' return
// carry tens of ms of scheduling noise), not an outage it left behind.
const unroutableAfterMargin = time.Second

// trimT drops the "t=" of an offset rendered by at.
func trimT(s string) string { return strings.TrimPrefix(s, "t=") }

// span renders "3.2 s" or "3.2-3.4 s".
func span(a, b time.Duration) string {
	if fmt.Sprintf("%.1f", a.Seconds()) == fmt.Sprintf("%.1f", b.Seconds()) {
		return seconds(a)
	}
	return fmt.Sprintf("%.1f-%.1f s", a.Seconds(), b.Seconds())
}

// unroutable reports every interval in which service had no replica in
// routing, with the part after a fault ended and the requests that
// failed in it.
func (c *ctx) unroutable(service string) []Finding {
	var out []Finding
	tl := c.routes[service]
	for _, iv := range c.unroute[service] {
		fd := Finding{Kind: KindUnroutable, Service: service, Start: iv.Start, End: iv.End}
		fd.Figures = []Figure{secFigure("length", iv.Len()), secFigure("start", iv.Start), secFigure("end", iv.End)}
		var b strings.Builder
		fmt.Fprintf(&b, "%s had no ready replica in the %s for %s (%s-%s s)", service, tl.Source, seconds(iv.Len()), at(iv.Start), trimT(at(iv.End)))
		f, ok := c.faultAround(iv)
		switch {
		case !ok:
			fd.Severity, fd.Rule = Warning, RuleUnroutableNoFault
			b.WriteString(" while no fault was on")
		default:
			fd.Fault = f.name
			after := iv.End - maxDur(iv.Start, f.off)
			if after >= unroutableAfterMargin {
				fd.Severity, fd.Rule = Warning, RuleUnroutableAfterFault
				fd.Figures = append(fd.Figures, secFigure("after-fault", after))
				if iv.Start >= f.off {
					fmt.Fprintf(&b, ", from %s after %s ended", seconds(iv.Start-f.off), f.name)
				} else {
					fmt.Fprintf(&b, ", %s of it after %s ended", seconds(after), f.name)
				}
			} else {
				fd.Severity, fd.Rule = Notice, RuleUnroutableDuring
				fmt.Fprintf(&b, " while %s was on", f.name)
			}
		}
		failed, total, secs := c.failuresIn(service, iv)
		if total > 0 {
			fd.Figures = append(fd.Figures, countFigure("failed", failed), countFigure("requests", total))
			fmt.Fprintf(&b, "; %s of %s requests due in %s failed", thousands(failed), thousands(total), secs)
		}
		if tl.Source == routing.TraefikAccessLog {
			text, figs := c.traefikBounds(service, iv)
			b.WriteString(text)
			fd.Figures = append(fd.Figures, figs...)
		}
		fd.Text = b.String()
		out = append(out, fd)
	}
	out = append(out, c.unhealthyRouted(service)...)
	return out
}

// traefikBounds says, for an unroutable interval read from Traefik's
// access log, how closely the log bounds its start and end (the latest
// request in the other state before each change, event.LabelSince) and
// how long after Docker's health status changed Traefik's Docker provider
// reacted: the interval's start after the container's last unhealthy
// status before it, its end after the healthy status before that end.
// Figures: start-bound, end-bound (s: the width of the bracket around each
// change), provider-reaction, provider-return (s).
func (c *ctx) traefikBounds(service string, iv routing.Interval) (string, []Figure) {
	var b strings.Builder
	var figs []Figure
	var removed, ready *event.Event
	for i, e := range c.events {
		if e.Service != service || e.Labels == nil {
			continue
		}
		if e.Kind == event.EndpointRemoved && e.At == iv.Start && removed == nil {
			removed = &c.events[i]
		}
		if e.Kind == event.EndpointReady && e.At == iv.End && ready == nil {
			ready = &c.events[i]
		}
	}
	since := func(e *event.Event) (time.Duration, bool) {
		if e == nil {
			return 0, false
		}
		ns, err := strconv.ParseInt(e.Labels[event.LabelSince], 10, 64)
		return time.Duration(ns), err == nil && time.Duration(ns) <= e.At
	}
	if lo, ok := since(removed); ok {
		figs = append(figs, secFigure("start-bound", iv.Start-lo))
		fmt.Fprintf(&b, "; Traefik's access log puts its start between %s s (the last request it forwarded) and %s s (the first it answered itself)",
			preciseAt(lo), preciseAt(iv.Start))
	}
	if lo, ok := since(ready); ok {
		figs = append(figs, secFigure("end-bound", iv.End-lo))
		fmt.Fprintf(&b, " and its end between %s s and %s s", preciseAt(lo), preciseAt(iv.End))
	}
	// Docker's health status: the last unready status of one of the
	// service's containers at or before the start, and the last ready one
	// after it and at or before the end.
	var down, up *event.Event
	for i, e := range c.events {
		if e.Service != service || strings.HasPrefix(e.Source, "traefik") {
			continue
		}
		switch {
		case e.At <= iv.Start && e.Kind == event.PodUnready:
			down = &c.events[i]
		case e.At <= iv.Start && e.Kind == event.PodReady && down != nil && e.Pod == down.Pod:
			down = nil // ready again before the interval: not its cause
		case e.At > iv.Start && e.At <= iv.End && e.Kind == event.PodReady && down != nil:
			up = &c.events[i]
		}
	}
	if down == nil {
		b.WriteString("; Docker reported no unready health status before it began")
		return b.String(), figs
	}
	reason := down.Reason
	if reason == "" {
		reason = "unready"
	}
	figs = append(figs, secFigure("provider-reaction", iv.Start-down.At))
	fmt.Fprintf(&b, "; it began %s after Docker reported %s %s (%s s: the Docker provider's reaction)",
		seconds(iv.Start-down.At), down.Pod, reason, trimT(at(down.At)))
	if up != nil && iv.End < c.end {
		figs = append(figs, secFigure("provider-return", iv.End-up.At))
		fmt.Fprintf(&b, " and ended %s after Docker reported it healthy again (%s s)", seconds(iv.End-up.At), trimT(at(up.At)))
	}
	return b.String(), figs
}

// preciseAt renders an offset on the run's clock in seconds to the ms,
// e.g. "12.340".
func preciseAt(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// unhealthyRouted reports, for a service routed by the real Traefik, each
// span in which Docker reported one of its containers unready while
// Traefik's access log shows it kept routing the service (no unroutable
// interval overlaps the span): a health state Traefik's Docker provider
// did not act on (docs/compose.md). Warning, rule traefik-kept-routing.
func (c *ctx) unhealthyRouted(service string) []Finding {
	tl := c.routes[service]
	if tl.Source != routing.TraefikAccessLog {
		return nil
	}
	var out []Finding
	open := map[string]time.Duration{}
	reason := map[string]string{}
	report := func(pod string, from, to time.Duration) {
		for _, iv := range c.unroute[service] {
			if iv.Start < to && from < iv.End {
				return
			}
		}
		// A span too short for the provider to react is not a finding.
		if to-from < unhealthyRoutedMin {
			return
		}
		fd := Finding{Kind: KindKeptRouting, Severity: Warning, Rule: RuleTraefikKeptRouting, Service: service, Pod: pod, Start: from, End: to,
			Figures: []Figure{secFigure("length", to-from), secFigure("start", from), secFigure("end", to)}}
		fd.Text = fmt.Sprintf("Docker reported %s %s for %s (%s-%s s) but Traefik kept routing %s: its access log shows no request it answered itself then",
			pod, reason[pod], seconds(to-from), at(from), trimT(at(to)), service)
		out = append(out, fd)
	}
	for _, e := range c.events {
		if e.Service != service || strings.HasPrefix(e.Source, "traefik") || e.At > c.end {
			continue
		}
		switch e.Kind {
		case event.PodUnready:
			if _, ok := open[e.Pod]; !ok {
				open[e.Pod] = e.At
				reason[e.Pod] = e.Reason
				if reason[e.Pod] == "" {
					reason[e.Pod] = "unready"
				}
			}
		case event.PodReady:
			if from, ok := open[e.Pod]; ok {
				report(e.Pod, max(from, 0), e.At)
				delete(open, e.Pod)
			}
		}
	}
	pods := make([]string, 0, len(open))
	for p := range open {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	for _, p := range pods {
		report(p, max(open[p], 0), c.end)
	}
	return out
}

// unhealthyRoutedMin: an unready span shorter than this is not reported
// as routed while unhealthy (Traefik's Docker provider reacts to an event
// within about a second; the ADR's phases last tens of seconds).
const unhealthyRoutedMin = 3 * time.Second

// faultAround returns the fault an unroutable interval belongs to: the
// last fault that turned on before the interval ended and whose recovery
// window (or the run) had not ended when it began.
func (c *ctx) faultAround(iv routing.Interval) (faultSpan, bool) {
	var best faultSpan
	found := false
	for _, f := range c.faults {
		if f.on < iv.End && iv.Start < maxDur(f.recEnd, f.off) {
			if !found || f.on > best.on {
				best, found = f, true
			}
		}
	}
	return best, found
}

// failuresIn counts the failed and all requests of the streams that
// target service, over the whole seconds iv touches (buckets are 1 s by
// intended send time). secs renders that span, e.g. "t=35-47 s".
func (c *ctx) failuresIn(service string, iv routing.Interval) (failed, total int64, secs string) {
	from := iv.Start.Truncate(time.Second)
	to := iv.End.Truncate(time.Second)
	if to < iv.End {
		to += time.Second
	}
	for _, name := range c.streamNames() {
		if c.serviceOf(name) != service {
			continue
		}
		b := c.window(name, from, to)
		failed += b.Failures()
		total += b.Requests
	}
	return failed, total, fmt.Sprintf("t=%d-%d s", int(from.Seconds()), int(to.Seconds()))
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// phaseOf names the phase t falls in: "before load", "baseline", "during
// <fault>", "after <fault>" (its recovery window), or "after the faults".
func (c *ctx) phaseOf(t time.Duration) string {
	if t < 0 {
		return "before load"
	}
	for _, f := range c.faults {
		if t >= f.on && t < f.off {
			return "during " + f.name
		}
	}
	for _, f := range c.faults {
		if t >= f.off && t < f.recEnd {
			return "after " + f.name
		}
	}
	if len(c.faults) == 0 || t < c.faults[0].on {
		return "baseline"
	}
	return "after the faults"
}

// restarts reports a service's restarts by phase (docs/DESIGN.md §10):
// before load (bring-up), baseline, during each fault, after it.
func (c *ctx) restarts(service string) []Finding {
	counts := map[string]int{}
	var order []string
	var first *event.Event
	n := 0
	for i, e := range c.events {
		if e.Kind != event.ContainerRestart || e.Service != service {
			continue
		}
		ph := c.phaseOf(e.At)
		if counts[ph] == 0 {
			order = append(order, ph)
		}
		counts[ph]++
		n++
		if first == nil {
			first = &c.events[i]
		}
	}
	fd := Finding{Kind: KindRestarts, Severity: Info, Service: service}
	fd.Figures = []Figure{countFigure("restarts", int64(n))}
	if n == 0 {
		fd.Text = fmt.Sprintf("%s: no restarts (bring-up included)", service)
		return []Finding{fd}
	}
	var parts []string
	duringFault, before := false, counts["before load"] > 0
	for _, ph := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[ph], ph))
		fd.Figures = append(fd.Figures, countFigure("restarts:"+ph, int64(counts[ph])))
		if strings.HasPrefix(ph, "during ") {
			duringFault = true
		}
	}
	switch {
	case duringFault:
		fd.Severity, fd.Rule = Warning, RuleRestartDuringFault
	case before:
		fd.Severity, fd.Rule = Warning, RuleRestartBeforeLoad
	default:
		fd.Severity, fd.Rule = Notice, RuleRestartOther
	}
	fd.Start, fd.Pod = first.At, first.Pod
	why := first.Reason
	if why == "" {
		why = "no reason recorded"
	}
	fd.Text = fmt.Sprintf("%s restarted %s (%s); first %s at %s s: %s",
		service, plural(n, "time"), strings.Join(parts, ", "), first.Pod, at(first.At), why)
	return []Finding{fd}
}

// crashLoops reports replicas of service that entered CrashLoopBackOff
// (the kubelet's "BackOff" event).
func (c *ctx) crashLoops(service string) []Finding {
	firstAt := map[string]time.Duration{}
	var pods []string
	for _, e := range c.events {
		if e.Service != service || e.Kind != event.K8sEvent || e.Reason != "BackOff" {
			continue
		}
		if _, ok := firstAt[e.Pod]; !ok {
			firstAt[e.Pod] = e.At
			pods = append(pods, e.Pod)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	first, _, _ := routing.FirstLast(firstAt)
	total := len(c.routes[service].Pods)
	fd := Finding{Kind: KindCrashLoop, Severity: Warning, Rule: RuleCrashLoop, Service: service, Start: first,
		Figures: []Figure{countFigure("replicas", int64(len(pods)))}}
	fd.Text = fmt.Sprintf("%d of %d replicas of %s entered CrashLoopBackOff, the first at %s s (%s): %s",
		len(pods), total, service, at(first), c.phaseOf(first), strings.Join(pods, ", "))
	return []Finding{fd}
}

// podFailures reports, for a platform fault, the requests that failed at
// the backend (the local Service answered them 502: refused, reset) on
// each pod the fault deleted, from its Killing to its leaving the Service
// (the EndpointRemoved event's Value), and how many on pods it did not
// delete. Nothing when the service's pods were not deleted by it or the
// Service does not count (kubernetes, compose).
func (c *ctx) podFailures(f faultSpan, service string) []Finding {
	killed := map[string]time.Duration{}
	for _, e := range c.events {
		if e.Service == service && e.Fault == f.name && e.Kind == event.K8sEvent && e.Reason == "Killing" {
			if _, ok := killed[e.Pod]; !ok {
				killed[e.Pod] = e.At
			}
		}
	}
	if len(killed) == 0 {
		return nil
	}
	type podFail struct {
		pod          string
		killed, left time.Duration
		n            int64
	}
	var fails []podFail
	var total, others int64
	counted := false
	for _, e := range c.events {
		if e.Service != service || e.Kind != event.EndpointRemoved || e.At < f.on || e.At > f.recEnd {
			continue
		}
		if !strings.Contains(e.Detail, "failed at the backend") {
			continue // not from a Service that counts them
		}
		counted = true
		n := int64(e.Value)
		if k, ok := killed[e.Pod]; ok {
			fails = append(fails, podFail{pod: e.Pod, killed: k, left: e.At, n: n})
			total += n
		} else {
			others += n
		}
	}
	if !counted {
		return nil
	}
	sort.Slice(fails, func(i, j int) bool { return fails[i].killed < fails[j].killed })
	fd := Finding{Kind: KindPodFailures, Severity: Info, Service: service, Fault: f.name, Start: f.on, End: f.recEnd}
	var parts []string
	for _, p := range fails {
		parts = append(parts, fmt.Sprintf("%s %d (deleted at %s s, left the Service %s later)", p.pod, p.n, at(p.killed), seconds(p.left-p.killed)))
		fd.Figures = append(fd.Figures, countFigure("failed:"+p.pod, p.n))
	}
	fd.Figures = append(fd.Figures, countFigure("failed-on-deleted-pods", total), countFigure("failed-on-other-pods", others))
	if total == 0 {
		fd.Text = fmt.Sprintf("no request to the %s of %s that %s deleted failed at the backend", plural(len(fails), "pod"), service, f.name)
		return []Finding{fd}
	}
	fd.Severity, fd.Rule = Notice, RulePodFailures
	fd.Text = fmt.Sprintf("%d requests to pods of %s that %s deleted failed at the backend (answered 502 by the local Service) while they were being deleted: %s; %d on other pods",
		total, service, f.name, strings.Join(parts, ", "), others)
	// The stream's windows count failures by when requests were due; a
	// pod still in the Service after the fault's window ended failed
	// requests due after it too, which the window's line leaves out.
	var late []string
	var lateN int64
	for _, p := range fails {
		if p.left > f.off && p.n > 0 {
			late = append(late, p.pod)
			lateN += p.n
		}
	}
	if len(late) > 0 {
		fd.Figures = append(fd.Figures, countFigure("failed-on-pods-left-after-window", lateN))
		on := "them"
		if len(late) == 1 {
			on = "it"
		}
		fd.Text += fmt.Sprintf("; %s left the Service after %s's window ended (%s s), so the %d failures on %s count partly after it: a window's figures count requests by when they were due, and those due after %s fall in the next window",
			strings.Join(late, ", "), f.name, trimT(at(f.off)), lateN, on, trimT(at(f.off)))
	}
	return []Finding{fd}
}
