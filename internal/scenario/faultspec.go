package scenario

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// FaultTarget says what a fault kind acts on.
type FaultTarget string

// Fault targets.
const (
	// TargetProxy: the fault acts on the Toxiproxy proxy named by
	// [Fault.Proxy].
	TargetProxy FaultTarget = "proxy"
	// TargetDependency: the fault acts on the local dependency named by
	// [Fault.Dependency].
	TargetDependency FaultTarget = "dependency"
	// TargetService: the fault acts on the pods of the service named by
	// [Fault.Service].
	TargetService FaultTarget = "service"
)

// FaultAttr is one kind-specific key a fault kind takes: latency, jitter,
// timeout, delay, rateKBps, averageSize, sizeVariation or bytes.
type FaultAttr struct {
	// Key is the YAML key, e.g. "latency".
	Key string
	// Required: a fault of the kind must set the key.
	Required bool
}

// FaultSpec is everything drill knows about one fault kind, in one place:
// what it acts on, the keys it takes, its defaults, its own rules and its
// reference docs. [Scenario.SetDefaults], [Scenario.Validate], [CheckFault]
// (and through it internal/inject), `drill plan` and the generated
// scenario reference all read it; the registry is [FaultSpecs].
type FaultSpec struct {
	// Type is the value of the fault's type key.
	Type FaultType
	// Target is what the kind acts on: a proxy or a local dependency.
	Target FaultTarget
	// KubernetesOnly: the kind acts on a cluster's API (a node) and is
	// refused in other environments.
	KubernetesOnly bool
	// Toxic is the Toxiproxy toxic type the kind adds, or "" when the kind
	// is not a toxic. Only toxics take stream and toxicity.
	Toxic string
	// Attrs are the kind-specific keys the kind takes; any other
	// kind-specific key of [Fault] is refused.
	Attrs []FaultAttr
	// Doc describes the kind for the scenario reference: what it does to
	// the traffic, its units, its defaults and how it is undone.
	Doc string
	// Example is one complete faults[] entry of the kind, in YAML, as the
	// reference shows it (a test validates it).
	Example string
	// Defaults fills the kind's own unset keys; nil when it has none.
	// Stream and toxicity of toxics are filled for every toxic.
	Defaults func(f *Fault)
	// Check reports the kind's own rules beyond required and allowed keys
	// (e.g. latency in whole milliseconds, averageSize above 0), each with
	// the key it is about ("" for the fault as a whole); nil when it has
	// none. It sees the fault with defaults applied. Rules a key obeys in
	// every kind (jitter <= latency) belong to the key, in faultAttrDefs.
	Check func(f *Fault, report func(key, msg string))
	// CheckTarget reports the kind's rules about the proxy or dependency
	// it acts on, which need the whole scenario; nil when it has none.
	// [Scenario.Validate] calls it once the target is known to exist.
	CheckTarget func(s *Scenario, f *Fault, report func(key, msg string))
}

// IsToxic reports whether the kind is a Toxiproxy toxic.
func (sp *FaultSpec) IsToxic() bool { return sp.Toxic != "" }

// attr returns the kind's entry for key.
func (sp *FaultSpec) attr(key string) (FaultAttr, bool) {
	for _, a := range sp.Attrs {
		if a.Key == key {
			return a, true
		}
	}
	return FaultAttr{}, false
}

// faultSpecs is the registry of fault kinds, in the order the reference
// lists them. Adding a kind: its spec (in its family's file or its own),
// one line here, and its injector in internal/inject.
var faultSpecs = []*FaultSpec{
	&latencySpec,
	&timeoutSpec,
	&bandwidthSpec,
	&slowCloseSpec,
	&resetPeerSpec,
	&slicerSpec,
	&limitDataSpec,
	&downSpec,
	&processPauseSpec,
	&containerPauseSpec,
	&podKillSpec,
	&rolloutSpec,
	&drainSpec,
}

// FaultTypes are the fault kinds of [FaultSpecs], sorted; used in hints
// and the schema.
var FaultTypes = faultTypeNames()

func faultTypeNames() []string {
	out := make([]string, len(faultSpecs))
	for i, sp := range faultSpecs {
		out[i] = string(sp.Type)
	}
	sort.Strings(out)
	return out
}

// FaultSpecs returns every fault kind's spec, in reference order. The
// specs are shared: callers must not modify them.
func FaultSpecs() []*FaultSpec { return append([]*FaultSpec(nil), faultSpecs...) }

// FaultSpecOf returns the spec of fault kind t; ok is false for an
// unknown kind.
func FaultSpecOf(t FaultType) (sp *FaultSpec, ok bool) {
	for _, sp := range faultSpecs {
		if sp.Type == t {
			return sp, true
		}
	}
	return nil, false
}

// faultAttrDef is one kind-specific key of [Fault]: whether a fault sets
// it, how `drill plan` prints it, and the bound every duration key obeys.
type faultAttrDef struct {
	key string
	// dur returns the key's value when it is a duration; nil otherwise.
	dur func(f *Fault) *Duration
	// set reports whether f sets the key.
	set func(f *Fault) bool
	// text is the key as `drill plan` prints it, e.g. "latency=8s".
	text func(f *Fault) string
	// valid returns the problem with the key's value that holds whatever
	// the kind (jitter <= latency, sizeVariation < averageSize, rateKBps
	// >= 0; like the 24h bound of every duration key), or ""; nil when the
	// key has no such rule. Rules only one kind has are its Check.
	valid func(f *Fault) string
}

// maxFaultDuration bounds every duration key of a fault.
const maxFaultDuration = 24 * time.Hour

// faultAttrDefs are the kind-specific keys of [Fault], in the order `drill
// plan` prints them.
var faultAttrDefs = []faultAttrDef{
	durAttr("latency", func(f *Fault) *Duration { return f.Latency }),
	withValid(durAttr("jitter", func(f *Fault) *Duration { return f.Jitter }), func(f *Fault) string {
		if f.Jitter != nil && f.Latency != nil && f.Jitter.D() > f.Latency.D() {
			return fmt.Sprintf("jitter (%s) must not exceed latency (%s)", f.Jitter.D(), f.Latency.D())
		}
		return ""
	}),
	durAttr("timeout", func(f *Fault) *Duration { return f.Timeout }),
	durAttr("delay", func(f *Fault) *Duration { return f.Delay }),
	{key: "rateKBps", set: func(f *Fault) bool { return f.RateKBps != nil },
		text: func(f *Fault) string { return fmt.Sprintf("rate=%dKB/s", *f.RateKBps) },
		valid: func(f *Fault) string {
			if f.RateKBps != nil && *f.RateKBps < 0 {
				return "rateKBps must not be negative"
			}
			return ""
		}},
	sizeAttr("averageSize", func(f *Fault) *ByteSize { return f.AverageSize }),
	withValid(sizeAttr("sizeVariation", func(f *Fault) *ByteSize { return f.SizeVariation }), func(f *Fault) string {
		if f.SizeVariation != nil && f.AverageSize != nil && *f.SizeVariation >= *f.AverageSize {
			return fmt.Sprintf("sizeVariation (%d) must be below averageSize (%d)", *f.SizeVariation, *f.AverageSize)
		}
		return ""
	}),
	sizeAttr("bytes", func(f *Fault) *ByteSize { return f.Bytes }),
	withValid(intAttr("count", func(f *Fault) *int { return f.Count }), func(f *Fault) string {
		if f.Count != nil && *f.Count < 1 {
			return fmt.Sprintf("count must be at least 1, got %d", *f.Count)
		}
		return ""
	}),
	withValid(intAttr("percent", func(f *Fault) *int { return f.Percent }), func(f *Fault) string {
		if f.Percent != nil && (*f.Percent < 1 || *f.Percent > 100) {
			return fmt.Sprintf("percent must be from 1 to 100, got %d", *f.Percent)
		}
		return ""
	}),
	{key: "pods", set: func(f *Fault) bool { return len(f.Pods) > 0 },
		text: func(f *Fault) string { return "pods=" + strings.Join(f.Pods, ",") }},
	{key: "seed", set: func(f *Fault) bool { return f.Seed != nil },
		text: func(f *Fault) string { return fmt.Sprintf("seed=%d", *f.Seed) }},
	{key: "signal", set: func(f *Fault) bool { return f.Signal != "" },
		text: func(f *Fault) string { return "signal=" + f.Signal },
		valid: func(f *Fault) string {
			if f.Signal != "" && !oneOf(f.Signal, PodKillSignals) {
				return unknownValue("signal", f.Signal, PodKillSignals)
			}
			return ""
		}},
	{key: "node", set: func(f *Fault) bool { return f.Node != "" },
		text: func(f *Fault) string { return "node=" + f.Node }},
	{key: "evict", set: func(f *Fault) bool { return f.Evict != nil },
		text: func(f *Fault) string { return fmt.Sprintf("evict=%t", *f.Evict) }},
	podsAttr("maxSurge", func(f *Fault) *IntOrPercent { return f.MaxSurge }),
	podsAttr("maxUnavailable", func(f *Fault) *IntOrPercent { return f.MaxUnavailable }),
}

func intAttr(key string, get func(f *Fault) *int) faultAttrDef {
	return faultAttrDef{key: key,
		set:  func(f *Fault) bool { return get(f) != nil },
		text: func(f *Fault) string { return fmt.Sprintf("%s=%d", key, *get(f)) }}
}

func podsAttr(key string, get func(f *Fault) *IntOrPercent) faultAttrDef {
	return faultAttrDef{key: key,
		set:  func(f *Fault) bool { return get(f) != nil },
		text: func(f *Fault) string { return fmt.Sprintf("%s=%s", key, get(f)) }}
}

func withValid(d faultAttrDef, valid func(f *Fault) string) faultAttrDef {
	d.valid = valid
	return d
}

func durAttr(key string, get func(f *Fault) *Duration) faultAttrDef {
	return faultAttrDef{key: key, dur: get,
		set:  func(f *Fault) bool { return get(f) != nil },
		text: func(f *Fault) string { return fmt.Sprintf("%s=%s", key, get(f).D()) }}
}

func sizeAttr(key string, get func(f *Fault) *ByteSize) faultAttrDef {
	return faultAttrDef{key: key,
		set:  func(f *Fault) bool { return get(f) != nil },
		text: func(f *Fault) string { return fmt.Sprintf("%s=%dB", key, int64(*get(f))) }}
}

// AttributeText lists the kind-specific keys f sets as `drill plan`
// prints them ("latency=8s", "rate=10KB/s", "bytes=1024B"), in a fixed
// order (latency, jitter, timeout, delay, rateKBps, averageSize,
// sizeVariation, bytes).
func (f Fault) AttributeText() []string {
	var out []string
	for _, d := range faultAttrDefs {
		if d.set(&f) {
			out = append(out, d.text(&f))
		}
	}
	return out
}

// setFaultDefaults fills f's unset keys with its kind's defaults: stream
// and toxicity for toxics, then the kind's own. An unknown kind is left
// alone (Validate reports it).
func setFaultDefaults(f *Fault) {
	sp, ok := FaultSpecOf(f.Type)
	if !ok {
		return
	}
	if sp.IsToxic() {
		setIf(&f.Stream, DefaultFaultStream)
		if f.Toxicity == nil {
			x := DefaultToxicity
			f.Toxicity = &x
		}
	}
	if sp.Defaults != nil {
		sp.Defaults(f)
	}
}

// checkFault reports the problems of f that f alone shows (defaults
// applied), in this order: an unknown type; keys the kind needs or does
// not take; its target (proxy or dependency) missing, or the other one
// set; stream and toxicity; the kind's own rules; the rules of each key
// set (jitter <= latency, sizeVariation < averageSize, no negative rate,
// durations up to 24h), whether the kind takes the key or not.
// Whether the named proxy or dependency exists and whether the fault fits
// the timeline need the whole scenario: [Scenario.Validate] checks those.
func checkFault(f *Fault, report func(key, msg string)) {
	sp, ok := FaultSpecOf(f.Type)
	if !ok {
		report("type", unknownValue("fault type", string(f.Type), FaultTypes))
		return
	}
	var takes []string
	for _, a := range sp.Attrs {
		takes = append(takes, a.Key)
	}
	for _, d := range faultAttrDefs {
		a, allowed := sp.attr(d.key)
		set := d.set(f)
		if set && !allowed {
			report(d.key, fmt.Sprintf("%s does not apply to a %s fault%s", d.key, f.Type, keyList(takes)))
		}
		if a.Required && !set {
			report("", fmt.Sprintf("a %s fault needs %s", f.Type, d.key))
		}
	}
	switch sp.Target {
	case TargetProxy:
		if f.Proxy == "" {
			report("", fmt.Sprintf("a %s fault needs proxy (the name of one of proxies)", f.Type))
		}
		if f.Dependency != "" {
			report("dependency", fmt.Sprintf("dependency does not apply to a %s fault (it acts on proxy)", f.Type))
		}
	case TargetDependency:
		if f.Dependency == "" {
			report("", fmt.Sprintf("a %s fault needs dependency (the name of one of dependencies)", f.Type))
		}
		if f.Proxy != "" {
			report("proxy", fmt.Sprintf("proxy does not apply to a %s fault (it acts on dependency)", f.Type))
		}
	case TargetService:
		if f.Service == "" {
			report("", fmt.Sprintf("a %s fault needs service (the name of one of services)", f.Type))
		}
		if f.Proxy != "" {
			report("proxy", fmt.Sprintf("proxy does not apply to a %s fault (it acts on service)", f.Type))
		}
		if f.Dependency != "" {
			report("dependency", fmt.Sprintf("dependency does not apply to a %s fault (it acts on service)", f.Type))
		}
	}
	if sp.Target != TargetService && f.Service != "" {
		report("service", fmt.Sprintf("service does not apply to a %s fault (it acts on %s)", f.Type, sp.Target))
	}
	if sp.IsToxic() {
		if !oneOf(f.Stream, FaultStreams) {
			report("stream", unknownValue("stream direction", f.Stream, FaultStreams))
		}
		if x := f.Toxicity; x != nil && !(*x >= 0 && *x <= 1) {
			report("toxicity", fmt.Sprintf("toxicity must be between 0 and 1, got %v", *x))
		} else if x != nil && *x == 0 {
			report("toxicity", "toxicity 0 would never affect a connection (Toxiproxy reads it as never); leave it out (default 1) or give a value above 0")
		}
	} else {
		if f.Stream != "" {
			report("stream", fmt.Sprintf("stream applies only to toxics, not to a %s fault", f.Type))
		}
		if f.Toxicity != nil {
			report("toxicity", fmt.Sprintf("toxicity applies only to toxics, not to a %s fault", f.Type))
		}
	}
	if sp.Check != nil {
		sp.Check(f, report)
	}
	for _, d := range faultAttrDefs {
		if d.valid != nil {
			if msg := d.valid(f); msg != "" {
				report(d.key, msg)
			}
		}
	}
	for _, d := range faultAttrDefs {
		if d.dur == nil {
			continue
		}
		if x := d.dur(f); x != nil && x.D() > maxFaultDuration {
			report(d.key, fmt.Sprintf("%s %s is too long", d.key, x.D()))
		}
	}
}

// CheckFault checks one fault on its own, with its kind's defaults applied
// to a copy, by the same rules [Scenario.Validate] applies (see
// checkFault): for callers that may get a fault that was not validated,
// such as internal/inject. It returns nil or one error listing every
// problem ("; "-separated).
func CheckFault(f Fault) error {
	setFaultDefaults(&f)
	var msgs []string
	checkFault(&f, func(_, msg string) { msgs = append(msgs, msg) })
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// WithDefaults returns f with its kind's defaults applied (what
// [Scenario.SetDefaults] does to each fault).
func (f Fault) WithDefaults() Fault {
	setFaultDefaults(&f)
	return f
}

// wholeMillis reports a positive duration key that rounds to 0 ms:
// Toxiproxy counts whole milliseconds, and 0 often means "forever" or
// "off" to it.
func wholeMillis(key string, d *Duration, report func(key, msg string)) {
	if d != nil && d.D() > 0 && d.D().Round(time.Millisecond) == 0 {
		report(key, fmt.Sprintf("%s %s rounds to 0ms; Toxiproxy counts whole milliseconds", key, d.D()))
	}
}

// wholeMillisKeys returns a [FaultSpec.Check] that applies [wholeMillis] to
// each of the duration keys keys (of faultAttrDefs), in faultAttrDefs'
// order. A key that is not one panics when the package is initialised.
func wholeMillisKeys(keys ...string) func(f *Fault, report func(key, msg string)) {
	for _, k := range keys {
		if !slices.ContainsFunc(faultAttrDefs, func(d faultAttrDef) bool { return d.key == k && d.dur != nil }) {
			panic("scenario: wholeMillisKeys: " + k + " is not a duration key of Fault")
		}
	}
	return func(f *Fault, report func(key, msg string)) {
		for _, d := range faultAttrDefs {
			if d.dur != nil && slices.Contains(keys, d.key) {
				wholeMillis(d.key, d.dur(f), report)
			}
		}
	}
}

// keyList renders the keys a kind takes for a "does not apply" message.
func keyList(keys []string) string {
	if len(keys) == 0 {
		return " (it takes no attributes)"
	}
	clean := append([]string(nil), keys...)
	sort.Strings(clean)
	return "; it takes: " + strings.Join(clean, ", ")
}
