package scenario

import "strings"

// The assertion kinds about conditions over time: a metric's samples, and
// how soon a condition holds again after a fault.
const (
	AssertMetric   AssertionType = "metric"   // Metric, Labels, Op, Value
	AssertRecovery AssertionType = "recovery" // Metric or Stream condition, Hold, Within
)

var metricSpec = AssertionSpec{
	Type:   AssertMetric,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "metric", Required: true}, {Key: "op", Required: true}, {Key: "value", Required: true}, {Key: "labels"}},
	Doc: "Passes when every sample of metric (the series labels selects) in the window " +
		"satisfies op value. The metric comes from observers.metrics (a /metrics scrape), " +
		"from observers.postgres (pg_backends, pg_backends_state, pg_up) " +
		"or is the name of an observers.promql query. No sample in the window is an error.",
	Example: `- type: metric
  metric: db_pool_waiting
  labels:
    pool: orders
  op: <=
  value: 10
  window: fault:pg-pause`,
}

var recoverySpec = AssertionSpec{
	Type: AssertRecovery,
	Live: LiveAtEnd,
	Fields: []AssertionField{{Key: "within", Required: true}, {Key: "hold"}, {Key: "fault"}, {Key: "metric"}, {Key: "labels"},
		{Key: "op"}, {Key: "value"}, {Key: "stream"}, {Key: "maxLatency"}, {Key: "maxRate"}},
	Doc: "Measures the time from the fault's end to the first moment a condition holds and " +
		"keeps holding for hold (default 2s), and passes when it is at most within. The " +
		"condition is on a metric (metric, op and value, like a metric assertion) or on a " +
		"stream (stream with maxLatency and/or maxRate: each second's p99 and error rate " +
		"within them), not both. The fault is fault, else that of a fault:/recovery: " +
		"window, else the scenario's only one.",
	Example: `- type: recovery
  stream: orders
  maxLatency: 120ms
  maxRate: 0.01
  hold: 5s
  within: 5s
  window: recovery:pg-pause`,
	Defaults: func(s *Scenario, a *Assertion) {
		if a.Hold == nil {
			a.Hold = &Duration{DefaultHold}
		}
		if a.Fault == "" {
			if _, f, ok := strings.Cut(a.Window, ":"); ok && (strings.HasPrefix(a.Window, "fault:") || strings.HasPrefix(a.Window, "recovery:")) {
				a.Fault = f
			} else if len(s.Faults) == 1 {
				a.Fault = s.Faults[0].Name
			}
		}
	},
	check: func(c *assertionCheck) {
		a := c.a
		byMetric := a.Metric != "" || a.Op != "" || a.Value != nil
		byStream := a.Stream != ""
		switch {
		case byMetric && byStream:
			c.errorf("", "a recovery assertion watches either a metric (metric, op, value) or a stream (stream with maxLatency and/or maxRate), not both")
		case byMetric && (a.Metric == "" || a.Op == "" || a.Value == nil):
			c.errorf("", "a recovery condition on a metric needs metric, op and value")
		case byStream && a.MaxLatency == nil && a.MaxRate == nil:
			c.errorf("", "a recovery condition on a stream needs maxLatency and/or maxRate")
		case !byMetric && !byStream:
			c.errorf("", "a recovery assertion needs a condition: metric, op and value, or stream with maxLatency and/or maxRate")
		}
		if !byStream && (a.MaxLatency != nil || a.MaxRate != nil) {
			c.errorf("", "maxLatency and maxRate in a recovery assertion need stream")
		}
		if a.Fault == "" {
			c.errorf("", "a recovery assertion needs fault (which fault's end starts the clock)")
		} else {
			c.checkFaultRef()
		}
	},
}
