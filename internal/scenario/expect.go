package scenario

import "fmt"

// Expect says which verdict a run of the scenario must give to show that
// drill told the build apart: a naive twin (a build with the anti-pattern
// its source document names) declares the assertions it must fail on.
// A run gives the right verdict when exactly the assertions in Fail fail
// and every other assertion passes; with no expect (or an empty Fail)
// every assertion must pass. test/drills and bench/fidelity judge runs by
// it, `drill plan` shows it, and docs/CLAIMS.md names, per claim, the
// naive twin that must fail on it.
type Expect struct {
	// Fail names the assertions of this scenario a run must fail on, each
	// at most once; every other assertion must pass.
	Fail []string `yaml:"fail,omitempty" json:"fail,omitempty"`
}

// ExpectedFail reports whether the scenario's expect.fail names the
// assertion name.
func (s *Scenario) ExpectedFail(name string) bool {
	if s.Expect == nil {
		return false
	}
	for _, n := range s.Expect.Fail {
		if n == name {
			return true
		}
	}
	return false
}

// expect checks that every name in expect.fail is an assertion of the
// scenario, named once.
func (v *validator) expect() {
	if v.s.Expect == nil {
		return
	}
	var names []string
	have := map[string]bool{}
	for _, a := range v.s.Assertions {
		names = append(names, a.Name)
		have[a.Name] = true
	}
	seen := map[string]int{}
	for i, n := range v.s.Expect.Fail {
		p := fmt.Sprintf("expect.fail[%d]", i)
		switch j, dup := seen[n]; {
		case n == "":
			v.errorf(p, "an empty assertion name")
		case dup:
			v.errorf(p, "assertion %q is named twice (also expect.fail[%d])", n, j)
		case !have[n]:
			v.errorf(p, "no assertion named %q in this scenario%s", n, knownNames(names))
		default:
			seen[n] = i
		}
	}
}
