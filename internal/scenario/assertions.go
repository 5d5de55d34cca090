package scenario

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// AssertionType names an assertion kind (docs/DESIGN.md §9).
type AssertionType string

// Assertion is one check over one window. Which fields apply depends on Type.
type Assertion struct {
	// Name is unique; it names the JUnit test case. Default: type-window.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Type is the assertion kind.
	Type AssertionType `yaml:"type" json:"type"`
	// Window is run, baseline, fault:<name>, recovery:<name>, or a
	// timeline.windows name; default run.
	Window string `yaml:"window,omitempty" json:"window,omitempty"`
	// Source names a spec clause this assertion proves (e.g. INV-BH-02).
	Source string `yaml:"source,omitempty" json:"source,omitempty"`

	// Service names a service (restarts, endpoint-removal, flaps, ready).
	Service string `yaml:"service,omitempty" json:"service,omitempty"`
	// Stream names a stream (latency, error-rate, throughput, shed,
	// isolation, check, and recovery on a stream).
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`

	// Max is a count bound (restarts, flaps).
	Max *int `yaml:"max,omitempty" json:"max,omitempty"`
	// IncludeStartup also counts the restarts, crash loops and failed
	// starts of the service before load started (while services came up;
	// negative times on the run clock) (restarts). Default: true over the
	// run window, false over any other.
	IncludeStartup *bool `yaml:"includeStartup,omitempty" json:"includeStartup,omitempty"`
	// MinReady is the minimum ready replicas (ready).
	MinReady *int `yaml:"minReady,omitempty" json:"minReady,omitempty"`
	// Percentile for latency and endpoint-removal (default p99), and over
	// the replicas' detection times for detection (default p100: the last
	// replica).
	Percentile *Percentile `yaml:"percentile,omitempty" json:"percentile,omitempty"`
	// MaxLatency is a latency bound (latency, endpoint-removal, shed).
	MaxLatency *Duration `yaml:"maxLatency,omitempty" json:"maxLatency,omitempty"`
	// StatusClass for error-rate: 5xx, 4xx, errors (transport), non-2xx, any
	// (default: any failure = transport error or status >= 400).
	StatusClass string `yaml:"statusClass,omitempty" json:"statusClass,omitempty"`
	// Status narrows shed to one status code (e.g. 503); default 503 and 429.
	Status []int `yaml:"status,omitempty" json:"status,omitempty"`
	// MaxRate is a ratio bound 0..1: the share of completed requests in
	// the status class (error-rate); the share of the responses a check
	// applied to that failed it (check; default 0).
	MaxRate *float64 `yaml:"maxRate,omitempty" json:"maxRate,omitempty"`
	// Check names one of the stream's response checks (streams[].checks)
	// (check).
	Check string `yaml:"check,omitempty" json:"check,omitempty"`
	// MinRatio is achieved/intended 0..1 (throughput); default 0.995.
	MinRatio *float64 `yaml:"minRatio,omitempty" json:"minRatio,omitempty"`
	// RetryAfter requires every shed response to carry Retry-After (shed).
	RetryAfter *bool `yaml:"retryAfter,omitempty" json:"retryAfter,omitempty"`

	// Metric names a metric family for metric, reached and recovery assertions.
	Metric string `yaml:"metric,omitempty" json:"metric,omitempty"`
	// Labels select series of Metric (all must match).
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Op compares the metric with Value: <, <=, >, >=, ==, !=.
	Op string `yaml:"op,omitempty" json:"op,omitempty"`
	// Value is the metric bound.
	Value *float64 `yaml:"value,omitempty" json:"value,omitempty"`
	// Hold is how long the recovery condition must keep holding; default 2s.
	Hold *Duration `yaml:"hold,omitempty" json:"hold,omitempty"`
	// Within bounds the recovery time from the fault's end (recovery).
	Within *Duration `yaml:"within,omitempty" json:"within,omitempty"`
	// Fault names the fault whose end starts the recovery clock (recovery,
	// return), whose start starts the detection clock (detection), or
	// after whose end unroutable time counts (unroutable with
	// afterFaultEnd); default the fault of the window.
	Fault string `yaml:"fault,omitempty" json:"fault,omitempty"`
	// MaxDuration bounds a span of time: the longest interval with no ready
	// endpoint (unroutable), the time from the fault's start to its
	// replicas going unready (detection), or from the fault's end to the
	// last replica back in routing (return).
	MaxDuration *Duration `yaml:"maxDuration,omitempty" json:"maxDuration,omitempty"`
	// MinDuration bounds the time from the fault's end to the first
	// replica back in routing from below (return: readiness hysteresis,
	// MC-FD-01.2).
	MinDuration *Duration `yaml:"minDuration,omitempty" json:"minDuration,omitempty"`
	// AfterFaultEnd counts only the unroutable time after the fault ended
	// (unroutable); default false: all of it in the window.
	AfterFaultEnd *bool `yaml:"afterFaultEnd,omitempty" json:"afterFaultEnd,omitempty"`
	// Proxy names the proxy the service reaches its dependency through,
	// whose first answer the startup gate must wait for (startup-gate).
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`

	// MaxP99Ratio bounds the window p99 / baseline p99 (isolation).
	MaxP99Ratio *float64 `yaml:"maxP99Ratio,omitempty" json:"maxP99Ratio,omitempty"`
	// MaxErrorRateDelta bounds the window error rate minus baseline (isolation).
	MaxErrorRateDelta *float64 `yaml:"maxErrorRateDelta,omitempty" json:"maxErrorRateDelta,omitempty"`
}

// ClaimFigure names a routing figure a claim is compared with.
type ClaimFigure string

// Claim figures, each measured from the fault's start (detection-*,
// left-*) or end (back-*), over the service's replicas.
const (
	ClaimDetectionFirst ClaimFigure = "detection-first" // first replica unready
	ClaimDetectionLast  ClaimFigure = "detection-last"  // last replica unready
	ClaimLeftFirst      ClaimFigure = "left-first"      // first replica out of routing
	ClaimLeftLast       ClaimFigure = "left-last"       // last replica out of routing
	ClaimBackFirst      ClaimFigure = "back-first"      // first replica back in routing, from the fault's end
	ClaimBackLast       ClaimFigure = "back-last"       // last replica back in routing, from the fault's end
)

// Claim is a time a source document claims for a fault, reported beside
// the one the run measured (a finding of kind claim: notice when they
// differ by more than Tolerance, info otherwise). Claims never change the
// exit code; gate with a detection or unroutable assertion.
type Claim struct {
	// Name is unique among claims.
	Name string `yaml:"name" json:"name"`
	// Source quotes or cites the claim (e.g. "tutorial: unready at T=35s").
	Source string `yaml:"source,omitempty" json:"source,omitempty"`
	// Service names the service the claim is about.
	Service string `yaml:"service" json:"service"`
	// Fault names the fault the claimed time is measured from.
	Fault string `yaml:"fault" json:"fault"`
	// Figure is detection-first, detection-last, left-first, left-last (from
	// the fault's start), back-first or back-last (from its end).
	Figure ClaimFigure `yaml:"figure" json:"figure"`
	// Value is the claimed time from the fault's start (or end, back-*).
	Value Duration `yaml:"value" json:"value"`
	// Tolerance is how far the measured time may be from Value and still
	// agree; default 1s.
	Tolerance *Duration `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	StatusClasses = []string{"4xx", "5xx", "any", "errors", "non-2xx"}
	ClaimFigures  = []string{string(ClaimBackFirst), string(ClaimBackLast), string(ClaimDetectionFirst), string(ClaimDetectionLast),
		string(ClaimLeftFirst), string(ClaimLeftLast)}
	MetricOps = []string{"!=", "<", "<=", "==", ">", ">="}
)

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
		if len(s.Observers.Metrics)+len(s.Observers.PromQL)+len(s.Observers.Postgres) == 0 {
			c.errorf("metric", "no metrics source: add observers.metrics (a /metrics scrape), observers.promql or observers.postgres")
		}
	}
	positive("hold", a.Hold)
	positive("within", a.Within)
	if a.MaxDuration != nil && a.MaxDuration.D() < 0 {
		c.errorf("maxDuration", "maxDuration must not be negative")
	}
	if a.MinDuration != nil && a.MinDuration.D() < 0 {
		c.errorf("minDuration", "minDuration must not be negative")
	}
	// A kind that takes fault checks the name in its own check, where its
	// other rules about the fault are.
	if _, takesFault := sp.field("fault"); !takesFault {
		c.checkFaultRef()
	}
}

// claims checks each claim's name, service, fault, figure and times.
func (v *validator) claims() {
	faults := map[string]bool{}
	for _, f := range v.s.Faults {
		faults[f.Name] = true
	}
	services := v.serviceNames()
	seen := map[string]int{}
	for i, c := range v.s.Claims {
		p := fmt.Sprintf("claims[%d]", i)
		switch j, dup := seen[c.Name]; {
		case c.Name == "":
			v.errorf(p+".name", "a claim needs a name")
		case dup:
			v.errorf(p+".name", "duplicate claim name %q (also claims[%d])", c.Name, j)
		default:
			seen[c.Name] = i
		}
		if !oneOf(c.Service, services) {
			v.errorf(p+".service", "no service named %q%s", c.Service, knownNames(services))
		}
		if !faults[c.Fault] {
			v.errorf(p+".fault", "no fault named %q%s", c.Fault, knownNames(mapKeys(faults)))
		}
		if !oneOf(string(c.Figure), ClaimFigures) {
			v.errorf(p+".figure", "%s", unknownValue("claim figure", string(c.Figure), ClaimFigures))
		}
		if c.Value.D() < 0 {
			v.errorf(p+".value", "value must not be negative")
		}
		if c.Tolerance != nil && c.Tolerance.D() < 0 {
			v.errorf(p+".tolerance", "tolerance must not be negative")
		}
	}
}
