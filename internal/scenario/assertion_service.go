package scenario

// The assertion kinds about a service's replicas: their restarts,
// readiness and routing, judged from the run's pod and endpoint events.
const (
	AssertRestarts        AssertionType = "restarts"         // Service, Max (count)
	AssertFlaps           AssertionType = "flaps"            // Service, Max
	AssertReady           AssertionType = "ready"            // Service, MinReady replicas at window end
	AssertEndpointRemoval AssertionType = "endpoint-removal" // Service, MaxLatency, Percentile optional
	AssertUnroutable      AssertionType = "unroutable"       // Service, MaxDuration, AfterFaultEnd, Fault
	AssertDetection       AssertionType = "detection"        // Service, MaxDuration, Fault, Percentile (default p100)
	AssertStartupGate     AssertionType = "startup-gate"     // Service, Proxy optional; window run
	AssertReturn          AssertionType = "return"           // Service, MinDuration and/or MaxDuration, Fault
)

var restartsSpec = AssertionSpec{
	Type:   AssertRestarts,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "max", Required: true}, {Key: "includeStartup"}},
	Doc: "Counts the service's restarts in the window (container restarts plus pods " +
		"replaced) and passes when they are at most max. Over the run window the " +
		"restarts in the warm-up count, and so do the restarts, crash loops and failed " +
		"starts before load (includeStartup, default true there and false over any other " +
		"window), so replicas that crashed while coming up cannot pass as 0 restarts.",
	Example: `- type: restarts
  service: order-gateway
  max: 0
  window: run`,
}

var flapsSpec = AssertionSpec{
	Type:   AssertFlaps,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "max", Required: true}},
	Doc: "Counts each replica's ready/unready transitions in the window and passes when " +
		"the replica with the most has at most max (readiness hysteresis).",
	Example: `- type: flaps
  service: order-gateway
  max: 2
  window: fault:pg-pause`,
}

var readySpec = AssertionSpec{
	Type:   AssertReady,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "minReady", Required: true}},
	Doc: "Counts the service's replicas ready at the end of the window and passes when " +
		"there are at least minReady (at most the service's replicas in a local " +
		"environment).",
	Example: `- type: ready
  service: order-gateway
  minReady: 3
  window: recovery:pg-pause`,
}

var endpointRemovalSpec = AssertionSpec{
	Type:   AssertEndpointRemoval,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "maxLatency", Required: true}, {Key: "percentile"}},
	Doc: "For each replica that turns unready in the window, measures the time from its " +
		"Ready condition turning False to its endpoint leaving routing, and passes when " +
		"the percentile (default p99) of those times is at most maxLatency. A replica " +
		"unready that never leaves routing fails it.",
	Example: `- type: endpoint-removal
  service: order-gateway
  maxLatency: 2s
  window: fault:pg-pause`,
	Defaults: func(_ *Scenario, a *Assertion) { defaultPercentile(a) },
}

var unroutableSpec = AssertionSpec{
	Type:   AssertUnroutable,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "maxDuration", Required: true}, {Key: "afterFaultEnd"}, {Key: "fault"}},
	Doc: "Measures the longest interval in the window with no replica of the service in " +
		"routing and passes when it is at most maxDuration. With afterFaultEnd only the " +
		"time after the fault ended counts: the outage a dependency fault left behind " +
		"(the fault is fault, else that of a fault:/recovery: window, else the " +
		"scenario's only one).",
	Example: `- type: unroutable
  service: order-gateway
  maxDuration: 0s
  afterFaultEnd: true
  window: recovery:pg-pause`,
	check: func(c *assertionCheck) {
		c.checkFaultRef()
		if !c.faultKnown() && c.a.AfterFaultEnd != nil && *c.a.AfterFaultEnd {
			c.errorf("afterFaultEnd", "afterFaultEnd needs fault (after whose end to count), or a fault:<name> or recovery:<name> window")
		}
	},
}

var detectionSpec = AssertionSpec{
	Type:   AssertDetection,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "maxDuration", Required: true}, {Key: "fault"}, {Key: "percentile"}},
	Doc: "Measures, for each replica, the time from the fault's start to the replica going " +
		"unready within the window, and passes when the percentile over the replicas " +
		"(default p100: the last one) is at most maxDuration. A replica that never went " +
		"unready counts as never detected and fails it. The fault is fault, else that of " +
		"a fault:/recovery: window, else the scenario's only one.",
	Example: `- type: detection
  service: order-gateway
  fault: pg-pause
  maxDuration: 10s
  window: fault:pg-pause`,
	check: func(c *assertionCheck) {
		c.checkFaultRef()
		if !c.faultKnown() {
			c.errorf("", "a detection assertion needs fault (whose start starts the clock), or a fault:<name> or recovery:<name> window")
		}
	},
}

// returnSpec is the readiness hysteresis on the way back (HEALTH-ORD-001
// MC-FD-01.2: Unready -> Ready only after 2 consecutive successful probes):
// a replica must not come back sooner than its successThreshold allows.
var returnSpec = AssertionSpec{
	Type:   AssertReturn,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "minDuration"}, {Key: "maxDuration"}, {Key: "fault"}},
	Doc: "For each replica out of routing when the fault ended, measures the time from " +
		"the fault's end to the replica back in routing (Ready, and its endpoint ready " +
		"again) within the window, and passes when the earliest return is at least " +
		"minDuration and the latest at most maxDuration (either bound, or both). A " +
		"replica that never came back in the window fails it; with no replica out of " +
		"routing at the fault's end there is nothing to judge (an error). The fault is " +
		"fault, else that of a fault:/recovery: window, else the scenario's only one.",
	Example: `- type: return
  service: order-gateway
  fault: pg-pause
  minDuration: 4.5s
  maxDuration: 15s
  window: recovery:pg-pause`,
	check: func(c *assertionCheck) {
		c.checkFaultRef()
		if !c.faultKnown() {
			c.errorf("", "a return assertion needs fault (whose end starts the clock), or a fault:<name> or recovery:<name> window")
		}
		if c.a.MinDuration == nil && c.a.MaxDuration == nil {
			c.errorf("", "a return assertion needs minDuration, maxDuration or both")
		}
		if c.a.MinDuration != nil && c.a.MaxDuration != nil && c.a.MinDuration.D() > c.a.MaxDuration.D() {
			c.errorf("minDuration", "minDuration %s is above maxDuration %s", c.a.MinDuration.D(), c.a.MaxDuration.D())
		}
	},
}

var startupGateSpec = AssertionSpec{
	Type:   AssertStartupGate,
	Live:   LiveOnEvents,
	Fields: []AssertionField{{Key: "service", Required: true}, {Key: "proxy"}},
	Doc: "Checks the service's startup gate (ADR 0077 /startupz: failing until every " +
		"readiness check passed once, then passing for the life of the process) from " +
		"its gate checks: the startup probe's results, or in a compose environment the " +
		"container's healthcheck results. It passes when every replica process of the " +
		"service passed the gate, those up before load did so before t=0 (the " +
		"`up --wait`-style readiness), and no gate check of a process failed after its " +
		"first pass. With proxy, each replica's first pass before load must also come " +
		"after the first bytes the dependency sent back through that proxy (drill " +
		"watches the live counters of the run's own Toxiproxy): a gate that opens before its " +
		"dependency ever answered fails it. It judges the whole run, bring-up included " +
		"(window run).",
	Example: `- type: startup-gate
  service: order-gateway
  proxy: postgres
  window: run`,
	check: func(c *assertionCheck) {
		if c.a.Window != WindowRun {
			c.errorf("window", "a startup-gate assertion judges the whole run, bring-up included: window %s, not %q", WindowRun, c.a.Window)
		}
		if c.a.Proxy == "" {
			return
		}
		var names []string
		for _, p := range c.v.s.Proxies {
			if p.Name == c.a.Proxy {
				return
			}
			names = append(names, p.Name)
		}
		c.errorf("proxy", "no proxy named %q%s", c.a.Proxy, knownNames(names))
	},
}

// defaultPercentile sets a's percentile to [DefaultPercentile] when unset.
func defaultPercentile(a *Assertion) {
	if a.Percentile == nil {
		p := DefaultPercentile
		a.Percentile = &p
	}
}
