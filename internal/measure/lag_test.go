package measure

import (
	"testing"
	"time"
)

// TestLagRule pins the one lag rule: late and never-sent requests over the
// requests due, against the budget's fraction (default 1 %).
func TestLagRule(t *testing.T) {
	for _, c := range []struct {
		name     string
		count    LagCount
		budget   LagBudget
		fraction float64
		exceeded bool
	}{
		{"nothing due", LagCount{}, LagBudget{}, 0, false},
		{"on schedule", LagCount{Intended: 1000, Sent: 1000}, LagBudget{}, 0, false},
		{"1% late is within the default", LagCount{Intended: 1000, Sent: 1000, Late: 10}, LagBudget{}, 0.01, false},
		{"late beyond the default", LagCount{Intended: 1000, Sent: 1000, Late: 11}, LagBudget{}, 0.011, true},
		{"never sent is late", LagCount{Intended: 1000, Sent: 980}, LagBudget{}, 0.02, true},
		{"late and never sent add up", LagCount{Intended: 1000, Sent: 995, Late: 6}, LagBudget{}, 0.011, true},
		{"unknown schedule: late over sent", LagCount{Sent: 200, Late: 4}, LagBudget{}, 0.02, true},
		{"more sent than intended", LagCount{Intended: 100, Sent: 200, Late: 1}, LagBudget{}, 0.005, false},
		{"own budget", LagCount{Intended: 1000, Sent: 980}, LagBudget{Fraction: 0.05}, 0.02, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.count.Fraction(); got != c.fraction {
				t.Errorf("Fraction() = %v, want %v", got, c.fraction)
			}
			if got := c.budget.Exceeded(c.count); got != c.exceeded {
				t.Errorf("Exceeded() = %v, want %v", got, c.exceeded)
			}
		})
	}
	if d := (LagBudget{}).OrDefault(); d.LateAfter != 10*time.Millisecond || d.Fraction != 0.01 {
		t.Errorf("default budget %+v, want 10ms and 0.01", d)
	}
	b := NewBucket(0, time.Second)
	b.Intended, b.Requests, b.Late = 7, 5, 1
	if c := b.LagCount(); c != (LagCount{Intended: 7, Sent: 5, Late: 1}) || c.Missed() != 2 {
		t.Errorf("Bucket.LagCount() = %+v", c)
	}
}

// TestLagRuleNeverLooser: counting never-sent requests never judges a span
// more leniently than late/sent did, whatever the counts: a generator that
// was within budget by the one rule may only fall outside it by the other,
// never the reverse.
func TestLagRuleNeverLooser(t *testing.T) {
	for sent := int64(1); sent <= 60; sent += 7 {
		for late := int64(0); late <= sent; late += 3 {
			for intended := int64(0); intended <= 80; intended += 5 {
				c := LagCount{Intended: intended, Sent: sent, Late: late}
				if old := float64(late) / float64(sent); c.Fraction() < old {
					t.Fatalf("%+v: fraction %v below late/sent %v", c, c.Fraction(), old)
				}
			}
		}
	}
}
