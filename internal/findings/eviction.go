package findings

import (
	"fmt"
	"strings"

	"github.com/drillhq/drill/internal/event"
)

// KindEviction: pods a pod-kill (evict: true) or drain could not evict.
const KindEviction Kind = "eviction-refused"

// RuleEvictionRefused is the severity rule of a [KindEviction] finding:
// notice, the eviction API refused to evict a pod (a PodDisruptionBudget
// held it), so the fault ended fewer pods than it chose.
const RuleEvictionRefused = "eviction-refused"

// ReasonEvictionRefused is [event.ReasonEvictionRefused], the Reason of
// the K8sEvent this finding reads.
const ReasonEvictionRefused = event.ReasonEvictionRefused

// evictionsRefused returns one finding per fault whose evictions the API
// refused, naming the pods, from the EvictionRefused events.
func (c *ctx) evictionsRefused() []Finding {
	var out []Finding
	idx := map[string]int{}
	for _, e := range c.events {
		if e.Kind != event.K8sEvent || e.Reason != ReasonEvictionRefused {
			continue
		}
		i, ok := idx[e.Fault]
		if !ok {
			i = len(out)
			idx[e.Fault] = i
			out = append(out, Finding{Kind: KindEviction, Severity: Notice, Rule: RuleEvictionRefused,
				Service: e.Service, Fault: e.Fault, Start: e.At, End: e.At})
		}
		f := &out[i]
		f.End = e.At
		if f.Pod == "" {
			f.Pod = e.Pod
		} else {
			f.Pod += "," + e.Pod
		}
	}
	for i := range out {
		f := &out[i]
		pods := strings.Split(f.Pod, ",")
		f.Figures = []Figure{countFigure("refused", int64(len(pods)))}
		f.Text = fmt.Sprintf("fault %s: the eviction API refused to evict %d pod(s) of %s (%s): a PodDisruptionBudget held them; they were not ended",
			f.Fault, len(pods), f.Service, strings.Join(pods, ", "))
		if len(pods) > 1 {
			f.Pod = ""
		}
	}
	return out
}
