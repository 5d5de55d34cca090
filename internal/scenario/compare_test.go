package scenario

import (
	"strings"
	"testing"
	"time"
)

// TestCompareSection: the compare section decodes with units and refuses
// margins out of range, naming the key.
func TestCompareSection(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal+`compare:
  p99Increase: 0.5
  p99Slack: 10ms
  errorRateIncrease: 0.01
  recoveryIncrease: 0.3
  recoverySlack: 2s
  newRestarts: false
  passToFail: true
`)
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c := s.Compare
	if c == nil || *c.P99Increase != 0.5 || c.P99Slack.D() != 10*time.Millisecond || *c.ErrorRateIncrease != 0.01 ||
		*c.RecoveryIncrease != 0.3 || c.RecoverySlack.D() != 2*time.Second || *c.NewRestarts || !*c.PassToFail {
		t.Fatalf("compare section decoded as %+v", c)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"negative p99Increase", "compare:\n  p99Increase: -0.1\n", "compare.p99Increase: p99Increase must be at least 0, got -0.1"},
		{"errorRateIncrease above 1", "compare:\n  errorRateIncrease: 2\n", "compare.errorRateIncrease: errorRateIncrease must be between 0 and 1, got 2"},
		{"negative recoveryIncrease", "compare:\n  recoveryIncrease: -1\n", "compare.recoveryIncrease: recoveryIncrease must be at least 0, got -1"},
		{"unknown key", "compare:\n  p99Increse: 0.1\n", `unknown key "p99Increse"`},
		{"bare number slack", "compare:\n  p99Slack: 5\n", "compare.p99Slack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(minimal+tc.yaml))
			if err == nil {
				s.SetDefaults()
				err = s.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
