package assert

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/scenario"
)

// maxEvidence caps the evidence entries of one result.
const maxEvidence = 50

// maxLogLines caps the log lines kept with one piece of evidence.
const maxLogLines = 20

// isPodKind reports whether k describes a service's pods.
func isPodKind(k event.Kind) bool {
	switch k {
	case event.ProbeResult, event.PodReady, event.PodUnready, event.PodStarted,
		event.ContainerRestart, event.PodDeleted, event.PodCreated:
		return true
	}
	return false
}

// isEndpoint reports whether k is an EndpointSlice membership event.
func isEndpoint(k event.Kind) bool {
	return k == event.EndpointReady || k == event.EndpointNotReady || k == event.EndpointRemoved
}

// servicePods checks that a names a service the run observed and returns
// its pods (every pod named by a pod event of that service). It sets an
// Error verdict on r and returns false when the service is missing or was
// never observed: counting zero restarts of a service nobody watched would
// be a false pass.
func servicePods(in *input, a scenario.Assertion, r *Result) (map[string]bool, bool) {
	if a.Service == "" {
		setError(r, "%s assertion needs a service", a.Type)
		return nil, false
	}
	pods := map[string]bool{}
	seen := map[string]bool{}
	for _, e := range in.events {
		if !isPodKind(e.Kind) {
			continue
		}
		if e.Service != "" {
			seen[e.Service] = true
		}
		if e.Service == a.Service && e.Pod != "" {
			pods[e.Pod] = true
		}
	}
	if len(pods) == 0 {
		setError(r, "no pod events for service %q: was it observed? services observed: %s", a.Service, knownNames(seen))
		return nil, false
	}
	return pods, true
}

// judgeRestarts counts restarts of the service's containers in the window:
// restartCount rises (ContainerRestart events, by how much the count rose)
// plus pods replaced (the larger of pods deleted and pods created in the
// window). Zero restarts means both counts stay flat (docs/DESIGN.md §9).
// Pods that the run's own platform faults delete and create (pod-kill,
// rollout: their events name the fault) are the drill's doing, not the
// system's: they are counted apart, as "pods replaced by faults", and do
// not count against the bound.
// With IncludeStartup (default: over the run window only) the container
// restarts (crash loops and failed starts included) and pod deletions
// before load (negative times) count too, so replicas that crashed while
// coming up cannot pass as "0 restarts"; pods created before load are the
// bring-up itself and never count. Over the run window, which starts after
// the warm-up, restarts during the warm-up count as well: the warm-up
// keeps early latencies out of the figures, but a restart there is a
// restart under load, and "0 restarts" over the run must mean none from
// t=0.
// Bound: Max (default 0).
func judgeRestarts(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	include := r.Window == scenario.WindowRun
	if a.IncludeStartup != nil {
		include = *a.IncludeStartup
	}
	var startup, startupSkipped, warm int
	fromZero := r.Window == scenario.WindowRun
	counted := func(at time.Duration, n int) bool {
		switch {
		case inWindow(in.win, at):
			return true
		case fromZero && at >= 0 && at < in.win.Start:
			warm += n
			return true
		case at < 0 && include:
			startup += n
			return true
		case at < 0:
			startupSkipped += n
		}
		return false
	}
	max := 0
	if a.Max != nil {
		max = *a.Max
	}
	r.Bound = "<= " + plural(max, "restart")

	lastCount := map[string]int32{} // pod/container -> last restartCount seen
	var restarts, deleted, created int
	byFault := map[string][2]int{} // fault -> pods {deleted, created} by it
	for _, e := range in.events {
		if !pods[e.Pod] {
			continue
		}
		key := e.Pod + "/" + e.Container
		switch e.Kind {
		case event.PodStarted:
			if prev, ok := lastCount[key]; !ok || e.RestartCount > prev {
				lastCount[key] = e.RestartCount
			}
		case event.ContainerRestart:
			n := 1
			if prev, ok := lastCount[key]; ok && e.RestartCount > prev {
				n = int(e.RestartCount - prev)
			}
			if prev, ok := lastCount[key]; !ok || e.RestartCount > prev {
				lastCount[key] = e.RestartCount
			}
			if !counted(e.At, n) {
				continue
			}
			restarts += n
			r.Evidence = append(r.Evidence, Evidence{
				At: e.At, Pod: e.Pod, Logs: tail(e.Logs, maxLogLines),
				Detail: restartDetail(in, e, n),
			})
		case event.PodDeleted:
			if e.Fault != "" {
				if inWindow(in.win, e.At) {
					byFault[e.Fault] = [2]int{byFault[e.Fault][0] + 1, byFault[e.Fault][1]}
				}
				continue
			}
			if !counted(e.At, 1) {
				continue
			}
			deleted++
			d := fmt.Sprintf("pod deleted in %s", phaseAt(in.plan, e.At))
			if e.Reason != "" {
				d += "; reason: " + e.Reason
			}
			r.Evidence = append(r.Evidence, Evidence{At: e.At, Pod: e.Pod, Detail: d, Logs: tail(e.Logs, maxLogLines)})
		case event.PodCreated:
			if e.Fault != "" {
				if inWindow(in.win, e.At) {
					byFault[e.Fault] = [2]int{byFault[e.Fault][0], byFault[e.Fault][1] + 1}
				}
				continue
			}
			// Pods created before load are the bring-up, not replacements.
			if e.At < 0 || !counted(e.At, 0) {
				continue
			}
			created++
			r.Evidence = append(r.Evidence, Evidence{At: e.At, Pod: e.Pod,
				Detail: fmt.Sprintf("replacement pod created in %s", phaseAt(in.plan, e.At))})
		}
	}
	replaced := deleted
	if created > replaced {
		replaced = created
	}
	total := restarts + replaced
	r.Figure = countFigure("", total, "restart")
	r.Extra = []Figure{
		countFigure("container restarts", restarts, "restart"),
		countFigure("pods replaced", replaced, "pod"),
	}
	if n := replacedByFaults(byFault); n > 0 {
		r.Extra = append(r.Extra, countFigure("pods replaced by faults", n, "pod"))
	}
	r.Verdict = verdict(total <= max)
	where := r.Window
	if startup > 0 {
		where += fmt.Sprintf(", %d of them before load", startup)
		r.Extra = append(r.Extra, countFigure("before load", startup, "restart"))
	}
	if warm > 0 {
		where += fmt.Sprintf(", %d in the warm-up", warm)
		r.Extra = append(r.Extra, countFigure("in warm-up", warm, "restart"))
	}
	r.Message = fmt.Sprintf("%s of %s in %s (%s, %s replaced); bound %s",
		plural(total, "restart"), a.Service, where, plural(restarts, "container restart"), plural(replaced, "pod"), r.Bound)
	if startupSkipped > 0 {
		r.Message += fmt.Sprintf("; %s before load not counted (includeStartup is false)", plural(startupSkipped, "more restart"))
	}
	if len(r.Evidence) > 0 && r.Verdict == Fail {
		r.Message += "; first: " + r.Evidence[0].Pod + " " + r.Evidence[0].Detail
	}
	capEvidence(r)
}

// restartDetail explains a restart: phase, restart count and cause (the
// event's reason, or the last failing liveness/startup probe of the pod).
func restartDetail(in *input, e event.Event, n int) string {
	var b strings.Builder
	c := e.Container
	if c == "" {
		c = "container"
	}
	fmt.Fprintf(&b, "%s restarted", c)
	if n > 1 {
		fmt.Fprintf(&b, " %d times", n)
	}
	if e.RestartCount > 0 {
		fmt.Fprintf(&b, " (restartCount %d)", e.RestartCount)
	}
	fmt.Fprintf(&b, " in %s", phaseAt(in.plan, e.At))
	cause := e.Reason
	probe := e.Probe
	last := lastProbeFailure(in, e.Pod, e.At, probe)
	if cause == "" && last != nil {
		probe = last.Probe
		cause = probe + " probe failed"
	}
	if cause == "" {
		cause = "unknown"
	}
	fmt.Fprintf(&b, "; cause: %s", cause)
	if probe != "" && !strings.Contains(cause, probe) {
		fmt.Fprintf(&b, " (%s probe)", probe)
	}
	if last != nil && last.Detail != "" {
		fmt.Fprintf(&b, "; last %s probe failure at %s: %s", last.Probe, FormatOffset(last.At), last.Detail)
	}
	return b.String()
}

// lastProbeFailure finds the last failed liveness or startup probe of pod
// before t (of probe kind want, if set), looking back at most 5 minutes.
func lastProbeFailure(in *input, pod string, t time.Duration, want string) *event.Event {
	for i := len(in.events) - 1; i >= 0; i-- {
		e := &in.events[i]
		if e.At > t {
			continue
		}
		if t-e.At > 5*time.Minute {
			break
		}
		if e.Kind != event.ProbeResult || e.Pod != pod || e.OK {
			continue
		}
		if want != "" && e.Probe != want {
			continue
		}
		if want == "" && e.Probe != event.ProbeLiveness && e.Probe != event.ProbeStartup {
			continue
		}
		return e
	}
	return nil
}

func tail(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return lines[len(lines)-n:]
}

func capEvidence(r *Result) {
	if len(r.Evidence) > maxEvidence {
		more := len(r.Evidence) - maxEvidence
		r.Evidence = append(r.Evidence[:maxEvidence], Evidence{
			At: r.Evidence[maxEvidence].At, Detail: fmt.Sprintf("... and %d more", more)})
	}
}

// removal is one unready transition of a pod and how its endpoint left.
type removal struct {
	pod     string
	unready time.Duration
	left    time.Duration // when the endpoint was seen not ready or gone
	latency time.Duration
	ok      bool   // the endpoint left the slice
	how     string // the event kind that took it out, or why it never did
}

// judgeEndpointRemoval measures, for each pod of the service that turns
// unready in the window, the time from the harness seeing Ready=False to
// the harness seeing its endpoint not ready or gone (docs/DESIGN.md §9).
// The figure is the chosen percentile (default p99, nearest rank) over
// those transitions, compared with MaxLatency; max, detection time (fault
// on -> first unready) and return time (fault off -> the last unready pod
// ready and back in the slice) are reported too. A pod unready that never
// leaves the slice (before it turns ready again or observation ends) fails
// the assertion.
func judgeEndpointRemoval(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	if a.MaxLatency == nil {
		setError(r, "endpoint-removal assertion needs maxLatency")
		return
	}
	pct := 99.0
	if a.Percentile != nil {
		pct = float64(*a.Percentile)
	}
	bound := a.MaxLatency.D()
	r.Bound = fmt.Sprintf("%s <= %s", scenario.Percentile(pct), FormatDuration(bound))
	haveEndpoints := false
	for _, e := range in.events {
		if isEndpoint(e.Kind) && pods[e.Pod] {
			haveEndpoints = true
			break
		}
	}
	if !haveEndpoints {
		setError(r, "no EndpointSlice events for the pods of %q: is an EndpointSlice observer (or the local service proxy) reporting it?", a.Service)
		return
	}

	var rems []removal
	for i, e := range in.events {
		if e.Kind != event.PodUnready || !pods[e.Pod] || !inWindow(in.win, e.At) {
			continue
		}
		rems = append(rems, findRemoval(in, i))
	}
	var lat []time.Duration
	var never []removal
	for _, m := range rems {
		if m.ok {
			lat = append(lat, m.latency)
			r.Evidence = append(r.Evidence, Evidence{At: m.unready, Pod: m.pod,
				Detail: fmt.Sprintf("unready at %s, %s at %s: removal latency %s",
					FormatOffset(m.unready), m.how, FormatOffset(m.left), FormatDuration(m.latency))})
		} else {
			never = append(never, m)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	// Failures first in the evidence.
	var firstEv []Evidence
	for _, m := range never {
		firstEv = append(firstEv, Evidence{At: m.unready, Pod: m.pod,
			Detail: fmt.Sprintf("unready at %s but its endpoint never left the slice: %s", FormatOffset(m.unready), m.how)})
	}
	r.Evidence = append(firstEv, r.Evidence...)

	fig := nearestRank(lat, pct)
	var mx time.Duration
	if len(lat) > 0 {
		mx = lat[len(lat)-1]
	}
	r.Figure = durFigure("", fig)
	r.Extra = append(r.Extra, durFigure("max", mx), countFigure("unready transitions", len(rems), "transition"))
	addDetectionReturn(in, a, pods, r)

	switch {
	case len(rems) == 0:
		r.Verdict = Pass
		r.Figure = Figure{Value: 0, Unit: "ms", Text: "no pod went unready"}
		r.Message = fmt.Sprintf("no pod of %s went unready in %s", a.Service, r.Window)
	case len(never) > 0:
		r.Verdict = Fail
		if len(lat) == 0 {
			r.Figure = Figure{Value: 0, Unit: "ms", Text: "never removed"}
		}
		r.Message = fmt.Sprintf("%d of %d unready transitions of %s never left the EndpointSlice (first: %s at %s); %s %s, max %s",
			len(never), len(rems), a.Service, never[0].pod, FormatOffset(never[0].unready),
			scenario.Percentile(pct), r.Figure.Text, FormatDuration(mx))
	default:
		r.Verdict = verdict(fig <= bound)
		r.Message = fmt.Sprintf("%s removal latency %s over %s of %s (max %s); bound %s",
			scenario.Percentile(pct), FormatDuration(fig), plural(len(rems), "unready transition"), a.Service,
			FormatDuration(mx), r.Bound)
	}
	if src := routing.For(in.events, a.Service).Source; src == routing.LocalService {
		// Honest name: in local mode the figure is drill's own local
		// Service dropping the replica, not an EndpointSlice controller.
		r.Figure.Text += " (local Service)"
		r.Message += "; measured on drill's local Service, which drops a replica as soon as it is unready: " +
			"this is not an EndpointSlice figure (run in kubernetes mode for that)"
	}
	capEvidence(r)
}

// findRemoval follows the unready event in.events[i] to the moment its
// pod's endpoint was seen not ready or gone.
func findRemoval(in *input, i int) removal {
	u := in.events[i]
	m := removal{pod: u.Pod, unready: u.At}
	// Already out? The last endpoint event at or before the unready event,
	// when it took the endpoint out after the pod's last ready, counts as
	// removal at latency 0 (watch events of two resources can arrive in
	// either order).
	var lastReady time.Duration = -1 << 62
	var lastEP *event.Event
	for j := 0; j < len(in.events) && in.events[j].At <= u.At; j++ {
		e := &in.events[j]
		if e.Pod != u.Pod {
			continue
		}
		if e.Kind == event.PodReady {
			lastReady = e.At
		}
		if isEndpoint(e.Kind) {
			lastEP = e
		}
	}
	if lastEP != nil && lastEP.Kind != event.EndpointReady && lastEP.At >= lastReady {
		m.ok, m.left, m.latency = true, u.At, 0
		m.how = fmt.Sprintf("already %s (seen %s earlier)", lastEP.Kind, FormatDuration(u.At-lastEP.At))
		return m
	}
	for j := i + 1; j < len(in.events); j++ {
		e := in.events[j]
		if e.Pod != u.Pod {
			continue
		}
		switch e.Kind {
		case event.EndpointNotReady, event.EndpointRemoved:
			m.ok, m.left, m.latency = true, e.At, e.At-u.At
			m.how = string(e.Kind)
			if e.Kind == event.EndpointNotReady {
				m.how = "endpoint ready=false"
			} else {
				m.how = "endpoint removed"
			}
			return m
		case event.PodReady:
			m.how = fmt.Sprintf("the pod was ready again at %s (unready for %s) while its endpoint stayed ready",
				FormatOffset(e.At), FormatDuration(e.At-u.At))
			return m
		}
	}
	m.how = "its endpoint was still ready when observation ended"
	return m
}

// addDetectionReturn adds detection time (fault on -> first unready pod of
// the service) and return time (fault off -> every pod unready at fault off
// ready and back in the slice) to r.Extra when the assertion has a fault.
func addDetectionReturn(in *input, a scenario.Assertion, pods map[string]bool, r *Result) {
	f := faultOf(in, a)
	if f == "" {
		return
	}
	on, off, ok := faultSpan(in, f)
	if !ok {
		return
	}
	for _, e := range in.events {
		if e.Kind == event.PodUnready && pods[e.Pod] && e.At >= on {
			d := durFigure("detection", e.At-on)
			d.Text += " (" + f + " on -> " + e.Pod + " unready)"
			r.Extra = append(r.Extra, d)
			break
		}
	}
	out, back := returnTimes(in, pods, off, time.Duration(math.MaxInt64))
	if len(out) == 0 {
		return
	}
	var worst time.Duration
	var missing []string
	for _, p := range out {
		d, ok := back[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		if d > worst {
			worst = d
		}
	}
	if len(missing) > 0 {
		r.Extra = append(r.Extra, Figure{Name: "return", Unit: "ms", Value: -1,
			Text: "never: " + strings.Join(missing, ", ") + " not back in the slice after " + f + " off"})
		return
	}
	d := durFigure("return", worst)
	d.Text += fmt.Sprintf(" (%s off -> %s back in the slice)", f, plural(len(out), "pod"))
	r.Extra = append(r.Extra, d)
}

// returnTimes finds the pods out of routing at off (their last readiness
// event Unready, or their last endpoint event not ready or removed; pods
// deleted before off are left out), sorted, and for each one that came
// back by until the time from off to its return: Ready, then its endpoint
// ready again.
func returnTimes(in *input, pods map[string]bool, off, until time.Duration) ([]string, map[string]time.Duration) {
	podReady := map[string]bool{}
	epIn := map[string]bool{}
	for _, e := range in.events {
		if e.At > off || !pods[e.Pod] {
			continue
		}
		switch e.Kind {
		case event.PodReady:
			podReady[e.Pod] = true
		case event.PodUnready:
			podReady[e.Pod] = false
		case event.EndpointReady:
			epIn[e.Pod] = true
		case event.EndpointNotReady, event.EndpointRemoved:
			epIn[e.Pod] = false
		case event.PodDeleted:
			delete(podReady, e.Pod)
			delete(epIn, e.Pod)
		}
	}
	var out []string
	for p, ready := range podReady {
		if !ready || !epIn[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	back := map[string]time.Duration{}
	for _, p := range out {
		ready := podReady[p]
		for _, e := range in.events {
			if e.At <= off || e.Pod != p {
				continue
			}
			if e.At > until {
				break
			}
			if e.Kind == event.PodReady {
				ready = true
			}
			if e.Kind == event.PodUnready {
				ready = false
			}
			if e.Kind == event.EndpointReady && ready {
				back[p] = e.At - off
				break
			}
		}
	}
	return out, back
}

// judgeReturn measures, for each replica of the service out of routing when
// the fault ended, the time from the fault's end to its return to routing
// within the window, and holds the earliest to MinDuration and the latest
// to MaxDuration (MC-FD-01.2: back only after successThreshold successful
// probes). A replica that never came back fails it.
func judgeReturn(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	f := faultOf(in, a)
	if f == "" {
		setError(r, "return assertion needs a fault: set fault or use a fault:/recovery: window")
		return
	}
	_, off, ok := faultSpan(in, f)
	if !ok {
		setError(r, "fault %q is neither in the plan nor in the event log", f)
		return
	}
	var bounds []string
	if a.MinDuration != nil {
		bounds = append(bounds, fmt.Sprintf("first >= %s", FormatDuration(a.MinDuration.D())))
	}
	if a.MaxDuration != nil {
		bounds = append(bounds, fmt.Sprintf("last <= %s", FormatDuration(a.MaxDuration.D())))
	}
	if len(bounds) == 0 {
		setError(r, "return assertion needs minDuration or maxDuration")
		return
	}
	r.Bound = strings.Join(bounds, ", ") + " after " + f + " ended"
	out, back := returnTimes(in, pods, off, in.win.End)
	if len(out) == 0 {
		setError(r, "no replica of %s was out of routing when %s ended (%s): no return to judge", a.Service, f, FormatOffset(off))
		return
	}
	first, last := time.Duration(math.MaxInt64), time.Duration(-1)
	var missing []string
	for _, p := range out {
		d, ok := back[p]
		if !ok {
			missing = append(missing, p)
			r.Evidence = append(r.Evidence, Evidence{At: in.win.End, Pod: p,
				Detail: fmt.Sprintf("not back in routing by %s", FormatOffset(in.win.End))})
			continue
		}
		first, last = min(first, d), max(last, d)
		r.Evidence = append(r.Evidence, Evidence{At: off + d, Pod: p,
			Detail: fmt.Sprintf("back in routing at %s, %s after %s ended", FormatOffset(off+d), FormatDuration(d), f)})
	}
	r.Extra = []Figure{countFigure("replicas out", len(out), "replica"), countFigure("replicas back", len(back), "replica")}
	if len(back) == 0 {
		r.Verdict = Fail
		r.Figure = Figure{Value: -1, Unit: "ms", Text: "never"}
		r.Message = fmt.Sprintf("none of the %s of %s out of routing when %s ended came back in %s; bound %s",
			plural(len(out), "replica"), a.Service, f, r.Window, r.Bound)
		return
	}
	r.Extra = append(r.Extra, durFigure("first", first), durFigure("last", last))
	r.Figure = durFigure("", first)
	r.Figure.Text = fmt.Sprintf("first %s, last %s", FormatDuration(first), FormatDuration(last))
	ok = len(missing) == 0
	if a.MinDuration != nil && first < a.MinDuration.D() {
		ok = false
	}
	if a.MaxDuration != nil && last > a.MaxDuration.D() {
		ok = false
	}
	r.Verdict = verdict(ok)
	r.Message = fmt.Sprintf("%s of %s came back %s to %s after %s ended", plural(len(back), "replica"), a.Service,
		FormatDuration(first), FormatDuration(last), f)
	if len(missing) > 0 {
		r.Message += fmt.Sprintf("; %s never did (%s)", plural(len(missing), "replica"), strings.Join(missing, ", "))
	}
	r.Message += "; bound " + r.Bound
	capEvidence(r)
}

// judgeFlaps counts ready/unready transitions per pod in the window
// (repeated events in the same state are not transitions) and compares the
// worst pod with Max (the hysteresis check of HEALTH-ORD-001).
func judgeFlaps(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	if a.Max == nil {
		setError(r, "flaps assertion needs max")
		return
	}
	r.Bound = fmt.Sprintf("<= %s per pod", plural(*a.Max, "transition"))
	state := map[string]event.Kind{}
	count := map[string]int{}
	times := map[string][]string{}
	first := map[string]time.Duration{}
	for _, e := range in.events {
		if !pods[e.Pod] || (e.Kind != event.PodReady && e.Kind != event.PodUnready) {
			continue
		}
		prev, seen := state[e.Pod]
		state[e.Pod] = e.Kind
		if seen && prev == e.Kind {
			continue
		}
		if !seen && e.Kind == event.PodUnready {
			// A container starts unready: the first unready is no transition.
			continue
		}
		if !inWindow(in.win, e.At) {
			continue
		}
		if count[e.Pod] == 0 {
			first[e.Pod] = e.At
		}
		count[e.Pod]++
		word := "ready"
		if e.Kind == event.PodUnready {
			word = "unready"
		}
		times[e.Pod] = append(times[e.Pod], word+"@"+fmt.Sprintf("%.3fs", e.At.Seconds()))
	}
	names := make([]string, 0, len(pods))
	for p := range pods {
		names = append(names, p)
	}
	// Worst pod first, then by name.
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	worst, worstPod := 0, ""
	if len(names) > 0 && count[names[0]] > 0 {
		worst, worstPod = count[names[0]], names[0]
	}
	for _, p := range names {
		if count[p] > 0 {
			r.Evidence = append(r.Evidence, Evidence{At: first[p], Pod: p, Detail: fmt.Sprintf("%s: %s",
				plural(count[p], "transition"), strings.Join(times[p], " "))})
		}
	}
	r.Figure = countFigure("", worst, "transition")
	r.Verdict = verdict(worst <= *a.Max)
	if worstPod == "" {
		r.Message = fmt.Sprintf("no ready/unready transitions of %s in %s", a.Service, r.Window)
	} else {
		r.Message = fmt.Sprintf("at most %s per pod of %s in %s (worst: %s); bound %s",
			plural(worst, "transition"), a.Service, r.Window, worstPod, r.Bound)
	}
}

// judgeReady counts the service's replicas ready at the end of the window
// (from PodReady/PodUnready events before the window's end; deleted pods
// leave the count) and compares with MinReady (default: every replica
// known at that moment).
func judgeReady(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	ready := map[string]bool{}
	for _, e := range in.events {
		if e.At >= in.win.End || !pods[e.Pod] {
			continue
		}
		switch e.Kind {
		case event.PodReady:
			ready[e.Pod] = true
		case event.PodUnready, event.PodCreated, event.PodStarted:
			ready[e.Pod] = false
		case event.PodDeleted:
			delete(ready, e.Pod)
		}
	}
	total, n := len(ready), 0
	var unready []string
	for p, ok := range ready {
		if ok {
			n++
		} else {
			unready = append(unready, p)
		}
	}
	sort.Strings(unready)
	min := total
	if a.MinReady != nil {
		min = *a.MinReady
	}
	r.Bound = fmt.Sprintf(">= %d ready", min)
	r.Figure = Figure{Value: float64(n), Unit: "replicas", Text: fmt.Sprintf("%d/%d ready", n, total)}
	r.Verdict = verdict(n >= min && total > 0)
	for _, p := range unready {
		r.Evidence = append(r.Evidence, Evidence{At: in.win.End, Pod: p, Detail: "not ready at the end of " + r.Window})
	}
	r.Message = fmt.Sprintf("%d of %d replicas of %s ready at the end of %s (%s); bound %s",
		n, total, a.Service, r.Window, FormatOffset(in.win.End), r.Bound)
	if total == 0 {
		r.Message = fmt.Sprintf("no replicas of %s known at the end of %s", a.Service, r.Window)
	}
}

// replacedByFaults is the pods the run's own faults replaced, from
// {deleted, created} counts per fault: per fault the larger of the two,
// summed.
func replacedByFaults(byFault map[string][2]int) int {
	n := 0
	for _, c := range byFault {
		n += max(c[0], c[1])
	}
	return n
}
