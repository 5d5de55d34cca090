package scenario

import (
	"fmt"
)

// Compare holds the regression rules of `drill compare` and `drill
// history`. A figure is a regression only when it is worse than the
// baseline's by more than both its relative and its absolute margin, so
// noise on very small figures is not flagged. Unset keys keep the
// defaults given with each.
type Compare struct {
	// P99Increase is the relative margin for a stream window's p99
	// latency: worse by more than this fraction of the baseline's (0.2 =
	// 20 %) and by more than P99Slack is a regression. At least 0.
	// Default 0.2.
	P99Increase *float64 `yaml:"p99Increase,omitempty" json:"p99Increase,omitempty"`
	// P99Slack is the absolute margin for a stream window's p99 latency.
	// Default 5ms.
	P99Slack *Duration `yaml:"p99Slack,omitempty" json:"p99Slack,omitempty"`
	// ErrorRateIncrease is how far a stream window's error rate (failed /
	// completed requests) may rise, as a ratio of requests: 0.005 is half
	// a percentage point. Between 0 and 1. Default 0.005.
	ErrorRateIncrease *float64 `yaml:"errorRateIncrease,omitempty" json:"errorRateIncrease,omitempty"`
	// RecoveryIncrease is the relative margin for the times of findings
	// (recovery, detection, unroutable time): worse by more than this
	// fraction of the baseline's and by more than RecoverySlack is a
	// regression, and so is "never"/"not recovered" where the baseline had
	// a time. At least 0. Default 0.25.
	RecoveryIncrease *float64 `yaml:"recoveryIncrease,omitempty" json:"recoveryIncrease,omitempty"`
	// RecoverySlack is the absolute margin for the times of findings.
	// Default 1s.
	RecoverySlack *Duration `yaml:"recoverySlack,omitempty" json:"recoverySlack,omitempty"`
	// NewRestarts makes more restarts of a service than in the baseline a
	// regression. Default true.
	NewRestarts *bool `yaml:"newRestarts,omitempty" json:"newRestarts,omitempty"`
	// PassToFail makes an assertion that passed in the baseline and does
	// not pass now a regression. Default true.
	PassToFail *bool `yaml:"passToFail,omitempty" json:"passToFail,omitempty"`
}

// compare checks the margins of the compare section.
func (v *validator) compare() {
	c := v.s.Compare
	if c == nil {
		return
	}
	for _, m := range []struct {
		key string
		val *float64
		max float64
	}{{"p99Increase", c.P99Increase, 0}, {"errorRateIncrease", c.ErrorRateIncrease, 1}, {"recoveryIncrease", c.RecoveryIncrease, 0}} {
		if m.val == nil {
			continue
		}
		if *m.val < 0 || (m.max > 0 && *m.val > m.max) {
			bound := "at least 0"
			if m.max > 0 {
				bound = fmt.Sprintf("between 0 and %v", m.max)
			}
			v.errorf("compare."+m.key, "%s must be %s, got %v", m.key, bound, *m.val)
		}
	}
	for _, m := range []struct {
		key string
		val *Duration
	}{{"p99Slack", c.P99Slack}, {"recoverySlack", c.RecoverySlack}} {
		if m.val != nil && m.val.D() < 0 {
			v.errorf("compare."+m.key, "%s must not be negative, got %s", m.key, m.val.D())
		}
	}
}
