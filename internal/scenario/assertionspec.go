package scenario

import (
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
	&returnSpec,
	&startupGateSpec,
	&latencyAssertionSpec,
	&errorRateSpec,
	&throughputSpec,
	&shedSpec,
	&isolationSpec,
	&checkAssertionSpec,
	&metricSpec,
	&reachedSpec,
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
