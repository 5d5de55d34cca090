// Package scenario defines drill's declarative scenario format
// (apiVersion drill.dev/v1alpha1, kind Scenario), decodes it strictly from
// YAML with file:line:col positions, and validates it.
//
// The types here are the contract every other package reads: the planner
// (internal/plan) turns a Scenario into a timeline, the injectors read
// [Fault], the load engine reads [Stream], the local runtime reads
// [Service] and [Probe], and the assertions read [Assertion].
//
// Units live in types: [Duration] ("250ms", "15s"), [Rate] ("2800/s",
// "1400/1s", "90/m"), [ByteSize] ("64KiB"), [Percentile] ("p99", "99.9").
// A zero value of an optional field means "unset"; the field's doc comment
// gives the default applied by [Scenario.SetDefaults].
//
// Each fault kind and each assertion kind has one home: a [FaultSpec]
// (fault_*.go) or an [AssertionSpec] (assertion_*.go) holding the keys
// the kind needs and takes, its defaults, its own rules, its reference
// docs and an example, registered in [FaultSpecs] or [AssertionSpecs].
// Defaults, validation, `drill plan`, the generated reference and
// internal/inject ([CheckFault]) all read the spec; CONTRIBUTING.md says
// how to add a kind.
package scenario

// APIVersion is the only scenario apiVersion this drill understands.
const APIVersion = "drill.dev/v1alpha1"

// KindScenario is the only scenario kind.
const KindScenario = "Scenario"

// Scenario is one drill: what to start, what load to drive, which faults to
// inject when, what to watch and what to assert.
type Scenario struct {
	// APIVersion is always drill.dev/v1alpha1; required.
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Kind is always Scenario; required.
	Kind string `yaml:"kind" json:"kind"`
	// Metadata names the scenario; required.
	Metadata Metadata `yaml:"metadata" json:"metadata"`

	// Environment says where the system under test runs. Default: local.
	Environment Environment `yaml:"environment" json:"environment"`
	// Timeline fixes the run's length and its named phases.
	Timeline Timeline `yaml:"timeline" json:"timeline"`
	// Dependencies are started locally for the run (local environment only).
	Dependencies []Dependency `yaml:"dependencies,omitempty" json:"dependencies,omitempty"`
	// Toxiproxy says where proxies live. Default: a Toxiproxy server of drill's own.
	Toxiproxy Toxiproxy `yaml:"toxiproxy,omitempty" json:"toxiproxy,omitempty"`
	// Proxies are Toxiproxy proxies in front of dependencies.
	Proxies []Proxy `yaml:"proxies,omitempty" json:"proxies,omitempty"`
	// Services are the systems under test (local: run as replicas by the
	// local runtime; kubernetes: found by selector).
	Services []Service `yaml:"services,omitempty" json:"services,omitempty"`
	// Streams are the open-model load streams.
	Streams []Stream `yaml:"streams,omitempty" json:"streams,omitempty"`
	// Load says where the streams' load is generated. Default: in the drill
	// process.
	Load *LoadSpec `yaml:"load,omitempty" json:"load,omitempty"`
	// Faults are injected at set times of the timeline.
	Faults []Fault `yaml:"faults,omitempty" json:"faults,omitempty"`
	// Observers watch the system besides the load streams.
	Observers Observers `yaml:"observers,omitempty" json:"observers,omitempty"`
	// StopConditions end a fault early, stop load, or abort the run.
	StopConditions []StopCondition `yaml:"stopConditions,omitempty" json:"stopConditions,omitempty"`
	// Assertions are judged after the run, each over one window.
	Assertions []Assertion `yaml:"assertions,omitempty" json:"assertions,omitempty"`
	// Claims are times a source document claims (e.g. "unready at T=35 s");
	// each is reported beside the measured time as a finding, never gated.
	Claims []Claim `yaml:"claims,omitempty" json:"claims,omitempty"`
	// Expect names the assertions a run must fail on (a naive twin's);
	// every other assertion must pass. Default: every assertion passes.
	Expect *Expect `yaml:"expect,omitempty" json:"expect,omitempty"`
	// Redact adds header names and query keys to redact, and headers,
	// query keys and env names whose values may be recorded, to the rules
	// that keep secrets out of everything drill writes; the default rules
	// always apply.
	Redact Redaction `yaml:"redact,omitempty" json:"redact,omitempty"`
	// Compare overrides the rules by which `drill compare` and `drill
	// history` call a run of this scenario a regression against its
	// baseline; unset keys keep their defaults, and command-line flags
	// override both.
	Compare *Compare `yaml:"compare,omitempty" json:"compare,omitempty"`

	// File is the path the scenario was read from (not part of the YAML).
	File string `yaml:"-" json:"-"`
	// Positions maps a field path as the user wrote it
	// (e.g. "faults[0].toxic") to its position in File (not part of the YAML).
	Positions map[string]Position `yaml:"-" json:"-"`
}

// Position is a 1-based line and column in a scenario file.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	// File is set when the value came from another file than the scenario
	// (a Deployment manifest); empty means [Scenario.File].
	File string `json:"file,omitempty"`
}

// Metadata names and describes a scenario.
type Metadata struct {
	// Name is a DNS-label-like identifier (lower case, digits, '-'); required.
	// It names the report directory.
	Name string `yaml:"name" json:"name"`
	// Description is free text for people.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Sources lists the spec clauses the drill proves (e.g. "HEALTH-ORD-001 MC-FD-01").
	Sources []string `yaml:"sources,omitempty" json:"sources,omitempty"`
	// Labels are free key/value pairs copied into reports.
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

func (v *validator) metadata() {
	n := v.s.Metadata.Name
	switch {
	case n == "":
		v.errorf("metadata.name", "name is required")
	case !dnsLabelRE.MatchString(n):
		v.errorf("metadata.name", "invalid name %q: use lower-case letters, digits and '-' (at most 63, starting and ending with a letter or digit)", n)
	}
}
