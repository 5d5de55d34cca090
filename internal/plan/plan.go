// Package plan turns a validated scenario into the timeline a run carries
// out: when each stream starts and stops, when each fault turns on and off,
// which windows exist and which assertion judges which window. Offsets are
// from t=0, the moment load starts, on the run's single clock.
package plan

import "time"

// ActionKind names a timed action.
type ActionKind string

// Action kinds.
const (
	StreamStart ActionKind = "stream-start"
	StreamStop  ActionKind = "stream-stop"
	FaultOn     ActionKind = "fault-on"
	FaultOff    ActionKind = "fault-off"
	RunEnd      ActionKind = "run-end"
)

// Action is one timed step of the run.
type Action struct {
	At     time.Duration `json:"at"`
	Kind   ActionKind    `json:"kind"`
	Target string        `json:"target"` // stream or fault name
	Detail string        `json:"detail,omitempty"`
}

// Window is a named span [Start, End) of the run. Names: run, baseline,
// fault:<fault>, recovery:<fault>, or a user window name.
type Window struct {
	Name  string        `json:"name"`
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Fault is the fault a fault:/recovery: window belongs to.
	Fault string `json:"fault,omitempty"`
	// Manual: the fault starts or ends by an operator's hand (at: manual
	// or for: manual); before the run the window spans all it may cover,
	// after it the actual times.
	Manual bool `json:"manual,omitempty"`
}

// Judgement binds an assertion (by name) to the window it judges.
type Judgement struct {
	Assertion string `json:"assertion"`
	Type      string `json:"type"`
	Window    string `json:"window"`
	// IncludeStartup: a restarts assertion that also counts what happened
	// while services came up (before t=0), beside its window: its
	// includeStartup, default true over the run window.
	IncludeStartup bool `json:"includeStartup,omitempty"`
	// ExpectFail: the scenario's expect.fail names this assertion, so a
	// run of it gives the right verdict only when this assertion fails
	// (and every judgement without ExpectFail passes).
	ExpectFail bool `json:"expectFail,omitempty"`
}

// Plan is the whole timeline.
type Plan struct {
	Scenario string `json:"scenario"`
	// Duration is the run's length from t=0.
	Duration time.Duration `json:"duration"`
	// Warmup is excluded from every window.
	Warmup     time.Duration `json:"warmup"`
	Actions    []Action      `json:"actions"`
	Windows    []Window      `json:"windows"`
	Judgements []Judgement   `json:"judgements"`
	// BringUp is what the run does before t=0 (absent in records written
	// before it was planned).
	BringUp *BringUp `json:"bringUp,omitempty"`
}

// ExpectedFailures names the judgements a run must fail on (the
// scenario's expect.fail), in the scenario's order; empty when every
// assertion must pass.
func (p *Plan) ExpectedFailures() []string {
	var out []string
	for _, j := range p.Judgements {
		if j.ExpectFail {
			out = append(out, j.Assertion)
		}
	}
	return out
}

// Window returns the window named name.
func (p *Plan) Window(name string) (Window, bool) {
	for _, w := range p.Windows {
		if w.Name == name {
			return w, true
		}
	}
	return Window{}, false
}
