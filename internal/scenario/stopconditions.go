package scenario

import (
	"fmt"
)

// StopAction is what a stop condition does when it fires.
type StopAction string

// Stop actions, in the graded ladder of docs/DESIGN.md §15.
const (
	StopWarn      StopAction = "warn"       // log and record only
	StopEndFaults StopAction = "end-faults" // revert every fault now, keep load and measuring
	StopLoad      StopAction = "stop-load"  // revert faults and stop load
	StopAbort     StopAction = "abort"      // end the run (exit 3)
)

// StopCondition fires when Stream's error rate stays above ErrorRateAbove
// (0..1) for For.
type StopCondition struct {
	// Name is unique; it names the condition in events and reports.
	Name string `yaml:"name" json:"name"`
	// Stream names the stream whose error rate is watched; required.
	Stream string `yaml:"stream" json:"stream"`
	// ErrorRateAbove is the error-rate threshold, above 0 and at most 1; required.
	ErrorRateAbove float64 `yaml:"errorRateAbove" json:"errorRateAbove"`
	// For is how long the rate must stay above the threshold; required.
	For Duration `yaml:"for" json:"for"`
	// Action is warn, end-faults (default), stop-load or abort.
	Action StopAction `yaml:"action,omitempty" json:"action,omitempty"`
}

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	StopActions = []string{string(StopAbort), string(StopEndFaults), string(StopLoad), string(StopWarn)}
)

func (v *validator) stopConditions() {
	s := v.s
	names := make([]string, len(s.StopConditions))
	for i, c := range s.StopConditions {
		names[i] = c.Name
	}
	v.unique("stop condition", names, func(i int) string { return fmt.Sprintf("stopConditions[%d]", i) })
	streams := v.streamNames()
	for i, c := range s.StopConditions {
		p := fmt.Sprintf("stopConditions[%d]", i)
		if !oneOf(c.Stream, streams) {
			v.errorf(p+".stream", "no stream named %q%s", c.Stream, knownNames(streams))
		}
		if !(c.ErrorRateAbove > 0 && c.ErrorRateAbove <= 1) {
			v.errorf(p+".errorRateAbove", "errorRateAbove must be above 0 and at most 1, got %v", c.ErrorRateAbove)
		}
		if c.For.D() <= 0 {
			v.errorf(p+".for", "for must be above 0")
		}
		if !oneOf(string(c.Action), StopActions) {
			v.errorf(p+".action", "%s", unknownValue("stop action", string(c.Action), StopActions))
		}
	}
}
