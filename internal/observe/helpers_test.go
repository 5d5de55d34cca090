package observe

import (
	"fmt"
	"strings"

	"github.com/drillhq/drill/internal/event"
)

// fmtEvent renders an event on one line for failure messages and golden files.
func fmtEvent(e event.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9.3fs %-18s", e.At.Seconds(), e.Kind)
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("service", e.Service)
	add("pod", e.Pod)
	add("container", e.Container)
	add("address", e.Address)
	add("probe", e.Probe)
	if e.RestartCount != 0 {
		add("restarts", fmt.Sprint(e.RestartCount))
	}
	add("reason", e.Reason)
	add("metric", e.Metric)
	if e.Kind == event.Metric {
		add("value", fmt.Sprint(e.Value))
	}
	add("detail", e.Detail)
	return b.String()
}
