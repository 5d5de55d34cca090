package scenario

// AssertReached is the assertion kind that a metric reached a level at
// least once in its window: a lane filled to its quota, a state entered.
const AssertReached AssertionType = "reached" // Metric, Labels, Op, Value

var reachedSpec = AssertionSpec{
	Type:   AssertReached,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "metric", Required: true}, {Key: "op", Required: true}, {Key: "value", Required: true}, {Key: "labels"}},
	Doc: "Passes when at least one sample of metric (the series labels selects) in the " +
		"window satisfies op value: the level was reached, e.g. a bulkhead filled to its " +
		"quota of workers under overload (a metric assertion with <= bounds it from " +
		"above). The figure is the first sample that reached it, else the closest one. " +
		"The metric comes from observers.metrics, observers.postgres or observers.promql, " +
		"as for a metric assertion. No sample in the window is an error.",
	Example: `- type: reached
  metric: db_pool_waiting
  labels:
    pool: orders
  op: ">="
  value: 1
  window: fault:pg-pause`,
}
