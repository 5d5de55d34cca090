package scenario

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// AssertionField is one key an assertion kind takes beyond name, type,
// window and source.
type AssertionField struct {
	// Key is the YAML key of [Assertion], e.g. "maxLatency".
	Key string
	// Required: an assertion of the kind must set the key.
	Required bool
}

// AssertionSpec is everything drill knows about one assertion kind, in one
// place: the keys it needs and takes, its defaults, its own rules and its
// reference docs. [Scenario.SetDefaults], [Scenario.Validate] and the
// generated scenario reference read it; internal/assert judges the kind.
// The registry is [AssertionSpecs].
type AssertionSpec struct {
	// Type is the value of the assertion's type key.
	Type AssertionType
	// Fields are the keys the kind takes; any other key is refused.
	Fields []AssertionField
	// Doc describes the kind for the scenario reference: what it measures,
	// over which window, and when it passes.
	Doc string
	// Example is one complete assertions[] entry of the kind, in YAML, as
	// the reference shows it (a test validates it).
	Example string
	// Live is how the game-day console judges the kind while the run
	// lives (provisional verdicts); every kind declares it.
	Live LiveJudging
	// Defaults fills the kind's unset keys; nil when it has none. The
	// window and the name are filled for every kind.
	Defaults func(s *Scenario, a *Assertion)
	// check reports the kind's own rules, after the keys and their values
	// were checked; nil when it has none.
	check func(c *assertionCheck)
}

// LiveJudging is how the game-day console judges an assertion kind while
// the run lives; the run's end judges every kind on everything.
type LiveJudging string

// The ways a kind is judged while the run lives.
const (
	// LiveOnEvents: on the event log so far, the window clipped to now.
	LiveOnEvents LiveJudging = "events"
	// LiveOnSeconds: on its stream's seconds closed so far, merged over
	// its window (and baseline) as the seconds close.
	LiveOnSeconds LiveJudging = "seconds"
	// LiveAtEnd: not while the run lives; pending until the run ends.
	LiveAtEnd LiveJudging = "end"
)

// liveText says in the reference when the console judges a kind.
func (l LiveJudging) liveText() string {
	switch l {
	case LiveOnEvents:
		return "on the events so far"
	case LiveOnSeconds:
		return "on the stream's closed seconds so far"
	case LiveAtEnd:
		return "when the run ends"
	}
	return "undeclared"
}

// field returns the kind's entry for key.
func (sp *AssertionSpec) field(key string) (AssertionField, bool) {
	for _, f := range sp.Fields {
		if f.Key == key {
			return f, true
		}
	}
	return AssertionField{}, false
}

// assertionSpecs is the registry of assertion kinds, in the order the
// reference lists them. Adding a kind: its spec (in its family's file or
// its own), one line here, and its judge in internal/assert.
var assertionSpecs = []*AssertionSpec{
	&restartsSpec,
	&flapsSpec,
	&readySpec,
	&endpointRemovalSpec,
	&unroutableSpec,
	&detectionSpec,
	&startupGateSpec,
	&latencyAssertionSpec,
	&errorRateSpec,
	&throughputSpec,
	&shedSpec,
	&isolationSpec,
	&metricSpec,
	&recoverySpec,
}

// AssertionTypes are the assertion kinds of [AssertionSpecs], sorted; used
// in hints and the schema.
var AssertionTypes = assertionTypeNames()

func assertionTypeNames() []string {
	out := make([]string, len(assertionSpecs))
	for i, sp := range assertionSpecs {
		out[i] = string(sp.Type)
	}
	sort.Strings(out)
	return out
}

// AssertionSpecs returns every assertion kind's spec, in reference order.
// The specs are shared: callers must not modify them.
func AssertionSpecs() []*AssertionSpec { return append([]*AssertionSpec(nil), assertionSpecs...) }

// AssertionSpecOf returns the spec of assertion kind t; ok is false for an
// unknown kind.
func AssertionSpecOf(t AssertionType) (sp *AssertionSpec, ok bool) {
	for _, sp := range assertionSpecs {
		if sp.Type == t {
			return sp, true
		}
	}
	return nil, false
}

// defaultAssertion fills a's window, its kind's defaults, then its name.
func (s *Scenario) defaultAssertion(a *Assertion) {
	setIf(&a.Window, DefaultWindow)
	if sp, ok := AssertionSpecOf(a.Type); ok && sp.Defaults != nil {
		sp.Defaults(s, a)
	}
	if a.Name == "" && a.Type != "" {
		a.Name = string(a.Type) + "-" + a.Window
	}
}

// assertionCheck is what a kind's check sees of one assertion being
// validated.
type assertionCheck struct {
	v       *validator
	a       *Assertion
	p       string          // the assertion's path, e.g. "assertions[2]"
	windows map[string]Span // by name
	faults  map[string]bool // fault names
}

// errorf records a problem with key of the assertion ("" for the
// assertion as a whole).
func (c *assertionCheck) errorf(key, format string, args ...any) {
	p := c.p
	if key != "" {
		p += "." + key
	}
	c.v.errorf(p, format, args...)
}

// checkFaultRef reports a fault key naming no fault.
func (c *assertionCheck) checkFaultRef() {
	if c.a.Fault != "" && !c.faults[c.a.Fault] {
		c.errorf("fault", "no fault named %q%s", c.a.Fault, knownNames(mapKeys(c.faults)))
	}
}

// faultKnown reports whether the assertion's fault is known: named, that
// of its fault:/recovery: window, or the scenario's only one.
func (c *assertionCheck) faultKnown() bool {
	return c.a.Fault != "" || len(c.v.s.Faults) == 1 ||
		strings.HasPrefix(c.a.Window, "fault:") || strings.HasPrefix(c.a.Window, "recovery:")
}

// assertions checks every assertion: a unique name, a known type and
// window, the keys its kind needs and takes, the streams, services and
// faults it names, the range of each value, then its kind's own rules.
func (v *validator) assertions() {
	s := v.s
	windows := map[string]Span{}
	var windowNames []string
	for _, sp := range s.Spans() {
		windows[sp.Name] = sp
		windowNames = append(windowNames, sp.Name)
	}
	faults := map[string]bool{}
	for _, f := range s.Faults {
		faults[f.Name] = true
	}
	seen := map[string]int{}
	for i := range s.Assertions {
		a := &s.Assertions[i]
		p := fmt.Sprintf("assertions[%d]", i)
		if a.Name != "" {
			if j, dup := seen[a.Name]; dup {
				v.errorf(p+".name", "duplicate assertion name %q (also assertions[%d]); give each assertion its own name", a.Name, j)
			}
			seen[a.Name] = i
		}
		sp, known := AssertionSpecOf(a.Type)
		if !known {
			v.errorf(p+".type", "%s", unknownValue("assertion type", string(a.Type), AssertionTypes))
			continue
		}
		if w, ok := windows[a.Window]; !ok {
			v.errorf(p+".window", "no window named %q; known: %s", a.Window, strings.Join(windowNames, ", "))
		} else if w.To <= w.From {
			v.errorf(p+".window", "window %q is empty", a.Window)
		}
		c := &assertionCheck{v: v, a: a, p: p, windows: windows, faults: faults}
		v.assertionKeys(c, sp)
		v.assertionValues(c, sp)
		if sp.check != nil {
			sp.check(c)
		}
	}
}

// assertionKeys reports keys the assertion's kind does not take and keys
// it needs that are missing, in the order of [Assertion]'s fields.
func (v *validator) assertionKeys(c *assertionCheck, sp *AssertionSpec) {
	var takes []string
	for _, f := range sp.Fields {
		takes = append(takes, f.Key)
	}
	av := reflect.ValueOf(c.a).Elem()
	for _, f := range infoFor(av.Type()).fields {
		switch f.name {
		case "name", "type", "window", "source":
			continue
		}
		set := !av.Field(f.index).IsZero()
		field, allowed := sp.field(f.name)
		if set && !allowed {
			c.errorf(f.name, "%s does not apply to %s %s assertion%s", f.name, article(string(c.a.Type)), c.a.Type, keyList(takes))
		}
		if field.Required && !set {
			c.errorf("", "%s %s assertion needs %s", article(string(c.a.Type)), c.a.Type, f.name)
		}
	}
}

// assertionValues checks the names and ranges of the keys the assertion
// sets, whatever its kind (a key its kind does not take was reported by
// assertionKeys and is checked all the same).
func (v *validator) assertionValues(c *assertionCheck, sp *AssertionSpec) {
	s, a := v.s, c.a
	if streams := v.streamNames(); a.Stream != "" && !oneOf(a.Stream, streams) {
		c.errorf("stream", "no stream named %q%s", a.Stream, knownNames(streams))
	}
	if services := v.serviceNames(); a.Service != "" && !oneOf(a.Service, services) {
		c.errorf("service", "no service named %q%s", a.Service, knownNames(services))
	}
	if a.Max != nil && *a.Max < 0 {
		c.errorf("max", "max must not be negative")
	}
	if a.MinReady != nil {
		if *a.MinReady < 0 {
			c.errorf("minReady", "minReady must not be negative")
		}
		for _, svc := range s.Services {
			if svc.Name == a.Service && s.Environment.Type == EnvLocal && *a.MinReady > svc.Replicas {
				c.errorf("minReady", "minReady (%d) exceeds the service's replicas (%d)", *a.MinReady, svc.Replicas)
			}
		}
	}
	positive := func(key string, d *Duration) {
		if d != nil && d.D() <= 0 {
			c.errorf(key, "%s must be above 0", key)
		}
	}
	positive("maxLatency", a.MaxLatency)
	ratio := func(key string, x *float64, lowOpen bool) {
		if x == nil {
			return
		}
		ok := *x >= 0 && *x <= 1
		if lowOpen {
			ok = *x > 0 && *x <= 1
		}
		if !ok {
			lo := "between 0 and 1"
			if lowOpen {
				lo = "above 0 and at most 1"
			}
			c.errorf(key, "%s must be %s, got %v", key, lo, *x)
		}
	}
	ratio("maxRate", a.MaxRate, false)
	ratio("minRatio", a.MinRatio, true)
	ratio("maxErrorRateDelta", a.MaxErrorRateDelta, false)
	if a.MaxP99Ratio != nil && !(*a.MaxP99Ratio > 0 && !math.IsInf(*a.MaxP99Ratio, 0)) {
		c.errorf("maxP99Ratio", "maxP99Ratio must be above 0, got %v", *a.MaxP99Ratio)
	}
	if a.Percentile != nil && !(*a.Percentile > 0 && *a.Percentile <= 100) {
		c.errorf("percentile", "percentile must be above 0 and at most 100")
	}
	if a.StatusClass != "" && !oneOf(a.StatusClass, StatusClasses) {
		c.errorf("statusClass", "%s", unknownValue("status class", a.StatusClass, StatusClasses))
	}
	for j, code := range a.Status {
		if code < 100 || code > 599 {
			c.errorf(fmt.Sprintf("status[%d]", j), "status %d is not an HTTP status (100-599)", code)
		}
	}
	if a.Op != "" && !oneOf(a.Op, MetricOps) {
		c.errorf("op", "%s", unknownValue("operator", a.Op, MetricOps))
	}
	if a.Value != nil && (math.IsNaN(*a.Value) || math.IsInf(*a.Value, 0)) {
		c.errorf("value", "value must be a finite number")
	}
	if a.Metric != "" {
		if !metricRE.MatchString(a.Metric) && !v.isPromQLName(a.Metric) {
			c.errorf("metric", "invalid metric name %q", a.Metric)
		}
		if len(s.Observers.Metrics)+len(s.Observers.PromQL) == 0 {
			c.errorf("metric", "no metrics source: add observers.metrics (a /metrics scrape) or observers.promql")
		}
	}
	positive("hold", a.Hold)
	positive("within", a.Within)
	if a.MaxDuration != nil && a.MaxDuration.D() < 0 {
		c.errorf("maxDuration", "maxDuration must not be negative")
	}
	// A kind that takes fault checks the name in its own check, where its
	// other rules about the fault are.
	if _, takesFault := sp.field("fault"); !takesFault {
		c.checkFaultRef()
	}
}
