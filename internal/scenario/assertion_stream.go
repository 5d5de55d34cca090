package scenario

// The assertion kinds about a load stream, judged from its per-second
// measurements. Latency counts from each request's intended send time.
const (
	AssertLatency    AssertionType = "latency"    // Stream, Percentile, MaxLatency
	AssertErrorRate  AssertionType = "error-rate" // Stream, StatusClass, MaxRate
	AssertThroughput AssertionType = "throughput" // Stream, MinRatio (achieved/intended)
	AssertShed       AssertionType = "shed"       // Stream, MaxLatency, Percentile (default p99), RetryAfter
	AssertIsolation  AssertionType = "isolation"  // Stream, MaxP99Ratio, MaxErrorRateDelta
	AssertCheck      AssertionType = "check"      // Stream, Check, MaxRate (default 0)
)

var latencyAssertionSpec = AssertionSpec{
	Type:   AssertLatency,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "maxLatency", Required: true}, {Key: "percentile"}},
	Doc: "Passes when the stream's latency percentile (default p99) over the window is at " +
		"most maxLatency. Latency counts from the intended send time and includes failed " +
		"requests.",
	Example: `- type: latency
  stream: orders
  percentile: p99
  maxLatency: 120ms
  window: fault:pg-pause`,
	Defaults: func(_ *Scenario, a *Assertion) { defaultPercentile(a) },
}

var errorRateSpec = AssertionSpec{
	Type:   AssertErrorRate,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "maxRate", Required: true}, {Key: "statusClass"}},
	Doc: "Passes when the share of the window's completed requests in statusClass (default " +
		"any: transport errors and statuses from 400) is at most maxRate (0..1).",
	Example: `- type: error-rate
  stream: orders
  statusClass: 5xx
  maxRate: 0.001
  window: baseline`,
	Defaults: func(_ *Scenario, a *Assertion) { setIf(&a.StatusClass, DefaultStatusClass) },
}

var throughputSpec = AssertionSpec{
	Type:   AssertThroughput,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "minRatio"}},
	Doc: "Passes when the stream completed at least minRatio (default 0.995) of the " +
		"requests its schedule intended in the window: an open-model schedule that could " +
		"not be carried out shows here.",
	Example: `- type: throughput
  stream: orders
  minRatio: 0.99
  window: run`,
	Defaults: func(_ *Scenario, a *Assertion) {
		if a.MinRatio == nil {
			r := DefaultMinRatio
			a.MinRatio = &r
		}
	},
}

var shedSpec = AssertionSpec{
	Type:   AssertShed,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "maxLatency", Required: true}, {Key: "percentile"}, {Key: "status"}, {Key: "retryAfter"}},
	Doc: "Passes when the latency percentile (default p99) of the stream's shed responses " +
		"(status 503 and 429 unless status narrows it) in the window is at most " +
		"maxLatency and, with retryAfter, every shed response carried Retry-After. A " +
		"window with no shed response fails: the assertion claims the service sheds.",
	Example: `- type: shed
  stream: tax
  percentile: p90
  maxLatency: 5ms
  retryAfter: true
  window: fault:tax-brownout`,
	Defaults: func(_ *Scenario, a *Assertion) {
		if len(a.Status) == 0 {
			a.Status = append([]int(nil), DefaultShedStatus...)
		}
	},
}

var isolationSpec = AssertionSpec{
	Type:   AssertIsolation,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "maxP99Ratio"}, {Key: "maxErrorRateDelta"}},
	Doc: "Compares the stream in the window with its own baseline window (which needs a " +
		"fault starting after the warmup): passes when p99(window) / p99(baseline) is at " +
		"most maxP99Ratio and error rate(window) - error rate(baseline) at most " +
		"maxErrorRateDelta, whichever are given (at least one): the blast radius of a " +
		"bulkhead.",
	Example: `- type: isolation
  stream: card-auth
  maxP99Ratio: 1.5
  maxErrorRateDelta: 0.001
  window: fault:tax-brownout`,
	check: func(c *assertionCheck) {
		if c.a.MaxP99Ratio == nil && c.a.MaxErrorRateDelta == nil {
			c.errorf("", "an isolation assertion needs maxP99Ratio and/or maxErrorRateDelta")
		}
		if _, ok := c.windows[WindowBaseline]; !ok {
			c.errorf("", "an isolation assertion compares with the baseline window, which needs a fault starting after the warmup")
		}
		if c.a.Window == WindowBaseline {
			c.errorf("window", "an isolation assertion compares a window with the baseline; pick another window")
		}
	},
}

var checkAssertionSpec = AssertionSpec{
	Type:   AssertCheck,
	Live:   LiveOnSeconds,
	Fields: []AssertionField{{Key: "stream", Required: true}, {Key: "check", Required: true}, {Key: "maxRate"}},
	Doc: "Judges one of the stream's response checks (streams[].checks) over the window: " +
		"passes when the check applied to at least one response there and at most maxRate " +
		"(0..1, default 0: none) of those responses failed it. A window in which the check " +
		"applied to no response fails: the assertion claims something about responses that " +
		"never came. The evidence lists the window's first failures (intended send time, " +
		"status, reason).",
	Example: `- type: check
  stream: tax
  check: retry-after-5
  maxRate: 0
  window: fault:tax-brownout`,
	Defaults: func(_ *Scenario, a *Assertion) {
		if a.MaxRate == nil {
			r := 0.0
			a.MaxRate = &r
		}
	},
	check: func(c *assertionCheck) {
		if c.a.Check == "" || c.a.Stream == "" {
			return
		}
		for i := range c.v.s.Streams {
			st := &c.v.s.Streams[i]
			if st.Name != c.a.Stream {
				continue
			}
			if _, ok := st.CheckNamed(c.a.Check); !ok {
				var names []string
				for _, ck := range st.Checks {
					if !oneOf(ck.Name, names) {
						names = append(names, ck.Name)
					}
				}
				c.errorf("check", "stream %q has no check named %q%s", c.a.Stream, c.a.Check, knownNames(names))
			}
		}
	},
}
