package compare

import (
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

// Rule names, as they appear in a row's Rule and in docs/nightly.md.
const (
	RuleP99         = "p99"          // a stream window's p99 of successful requests worse by more than P99Increase and P99Slack
	RuleErrorRate   = "error-rate"   // a stream window's error rate up by more than ErrorRateIncrease
	RuleFindingTime = "finding-time" // a finding's time worse by more than RecoveryIncrease and RecoverySlack, or newly "never"
	RuleNewRestart  = "new-restart"  // more restarts of a service than in the baseline
	RulePassToFail  = "pass-to-fail" // an assertion that passed and no longer does
)

// Default regression margins (docs/nightly.md).
const (
	DefaultP99Increase       = 0.20
	DefaultP99Slack          = 5 * time.Millisecond
	DefaultErrorRateIncrease = 0.005
	DefaultRecoveryIncrease  = 0.25
	DefaultRecoverySlack     = time.Second
)

// Rules are the margins by which a figure of the new run is judged a
// regression against the baseline's. A time or latency is a regression
// only when it is worse by more than both its relative margin (a fraction
// of the baseline's figure) and its absolute one.
type Rules struct {
	// P99Increase is the relative margin of a stream window's p99 of
	// successful requests (0.2 = 20 %); P99Slack its absolute margin (ns in
	// JSON).
	P99Increase float64       `json:"p99Increase"`
	P99Slack    time.Duration `json:"p99Slack"`
	// ErrorRateIncrease is the rise of a stream window's error rate
	// allowed, as a ratio of requests (0.005 = half a percentage point).
	ErrorRateIncrease float64 `json:"errorRateIncrease"`
	// RecoveryIncrease and RecoverySlack (ns in JSON) are the margins of
	// the findings' times: recovery, detection, unroutable time.
	RecoveryIncrease float64       `json:"recoveryIncrease"`
	RecoverySlack    time.Duration `json:"recoverySlack"`
	// NewRestarts: more restarts of a service than in the baseline is a
	// regression.
	NewRestarts bool `json:"newRestarts"`
	// PassToFail: an assertion that passed in the baseline and does not
	// now is a regression.
	PassToFail bool `json:"passToFail"`
}

// DefaultRules returns the documented default rules.
func DefaultRules() Rules {
	return Rules{P99Increase: DefaultP99Increase, P99Slack: DefaultP99Slack, ErrorRateIncrease: DefaultErrorRateIncrease,
		RecoveryIncrease: DefaultRecoveryIncrease, RecoverySlack: DefaultRecoverySlack, NewRestarts: true, PassToFail: true}
}

// With returns r with the keys set in a scenario's compare section
// applied (nil: r unchanged).
func (r Rules) With(c *scenario.Compare) Rules {
	if c == nil {
		return r
	}
	if c.P99Increase != nil {
		r.P99Increase = *c.P99Increase
	}
	if c.P99Slack != nil {
		r.P99Slack = c.P99Slack.D()
	}
	if c.ErrorRateIncrease != nil {
		r.ErrorRateIncrease = *c.ErrorRateIncrease
	}
	if c.RecoveryIncrease != nil {
		r.RecoveryIncrease = *c.RecoveryIncrease
	}
	if c.RecoverySlack != nil {
		r.RecoverySlack = c.RecoverySlack.D()
	}
	if c.NewRestarts != nil {
		r.NewRestarts = *c.NewRestarts
	}
	if c.PassToFail != nil {
		r.PassToFail = *c.PassToFail
	}
	return r
}

// Check returns an error naming the first margin out of range (negative,
// or an error-rate margin above 1).
func (r Rules) Check() error {
	switch {
	case r.P99Increase < 0:
		return fmt.Errorf("p99 increase margin must be at least 0, got %v", r.P99Increase)
	case r.P99Slack < 0:
		return fmt.Errorf("p99 slack must not be negative, got %s", r.P99Slack)
	case r.ErrorRateIncrease < 0 || r.ErrorRateIncrease > 1:
		return fmt.Errorf("error rate increase margin must be between 0 and 1, got %v", r.ErrorRateIncrease)
	case r.RecoveryIncrease < 0:
		return fmt.Errorf("recovery increase margin must be at least 0, got %v", r.RecoveryIncrease)
	case r.RecoverySlack < 0:
		return fmt.Errorf("recovery slack must not be negative, got %s", r.RecoverySlack)
	}
	return nil
}

// worse reports whether now is worse than base (larger is worse) by more
// than the fraction rel of base and by more than abs (same unit).
func worse(base, now, rel, abs float64) bool {
	d := now - base
	return d > abs && d > rel*base
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}
