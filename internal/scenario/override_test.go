package scenario

import (
	"strings"
	"testing"
	"time"
)

func TestOverrideAssertionAssertion(t *testing.T) {
	orig := []Assertion{
		{Name: "auth-p99", Type: AssertLatency, Stream: "auth", MaxLatency: durp(120 * time.Millisecond)},
		{Type: AssertRestarts, Service: "order-gateway", Window: "fault:db-pause"},
	}
	as := append([]Assertion(nil), orig...)
	for _, s := range []string{"auth-p99.maxLatency=150ms", "auth-p99.percentile=p99.9", "restarts-fault:db-pause.max=2"} {
		if err := OverrideAssertion(as, s); err != nil {
			t.Fatalf("OverrideAssertion(%q): %v", s, err)
		}
	}
	if as[0].MaxLatency.D() != 150*time.Millisecond || float64(*as[0].Percentile) != 99.9 || *as[1].Max != 2 {
		t.Errorf("overrides not applied: %+v %+v", as[0], as[1])
	}
	if orig[0].MaxLatency.D() != 120*time.Millisecond {
		t.Error("Override changed the original assertion through a shared pointer")
	}
	for _, c := range []struct{ set, want string }{
		{"auth-p99.maxLatency", "want <assertion>.<field>=<value>"},
		{"nope.max=1", `no assertion named "nope"; assertions: auth-p99, restarts-fault:db-pause`},
		{"auth-p99.maxLatncy=1s", `unknown key "maxLatncy"; did you mean "maxLatency"?`},
		{"auth-p99.maxLatency=150", "has no unit"},
		{"auth-p99.type=shed", "cannot be changed"},
	} {
		err := OverrideAssertion(as, c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OverrideAssertion(%q) = %v, want error containing %q", c.set, err, c.want)
		}
	}
}

func durp(d time.Duration) *Duration {
	return &Duration{d}
}
