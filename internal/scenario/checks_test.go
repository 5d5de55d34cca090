package scenario

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestChecksValid loads a stream with each shape of check and a check
// assertion on it, and reads them back.
func TestChecksValid(t *testing.T) {
	doc := strings.Replace(fmt.Sprintf(exampleBase, "", `assertions:
  - type: check
    stream: tax
    check: tax-positive
    window: run`), `        equals: "5"
`, `        equals: "5"
      - name: problem-code
        status: [503]
        json: code
        equals: ERR_TAX_BULKHEAD_SATURATED
      - name: tax-positive
        json: fallback.tax_cents
        min: 1
      - name: empty-ok
        header: X-Empty
        equals: ""
`, 1)
	s, err := LoadReader("checks.yaml", strings.NewReader(doc))
	if err != nil {
		t.Fatalf("valid checks refused: %v", err)
	}
	st := s.Streams[1]
	if len(st.Checks) != 4 || !st.HasJSONCheck() || s.Streams[0].HasJSONCheck() {
		t.Fatalf("checks = %+v", st.Checks)
	}
	c, ok := st.CheckNamed("tax-positive")
	if !ok || *c.Min != 1 || c.Max != nil || !reflect.DeepEqual(c.Path(), []string{"fallback", "tax_cents"}) {
		t.Fatalf("tax-positive = %+v, path %v", c, c.Path())
	}
	if e, _ := st.CheckNamed("empty-ok"); e.Equals == nil || *e.Equals != "" {
		t.Fatalf("equals \"\" lost: %+v", e)
	}
	a := s.Assertions[0]
	if a.MaxRate == nil || *a.MaxRate != 0 {
		t.Fatalf("check assertion's maxRate = %v, want the default 0", a.MaxRate)
	}
}

// TestCheckAssertionRefs: the assertion's stream must have the check.
func TestCheckAssertionRefs(t *testing.T) {
	for _, c := range []struct {
		name, assertion, want string
	}{
		{"no such check", "stream: tax\n    check: nope", `assertions[0].check: stream "tax" has no check named "nope"; known: retry-after-5`},
		{"stream without checks", "stream: orders\n    check: retry-after-5", `stream "orders" has no check named "retry-after-5"; none are defined`},
		{"check missing", "stream: tax", "a check assertion needs check"},
		{"maxRate out of range", "stream: tax\n    check: retry-after-5\n    maxRate: 2", "maxRate must be between 0 and 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf(exampleBase, "", "assertions:\n  - type: check\n    "+c.assertion)
			_, err := LoadReader("refs.yaml", strings.NewReader(doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}
