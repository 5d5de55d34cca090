package needs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records what a helper did with it instead
// of ending the test; Fatalf and Skipf stop the calling goroutine as the
// real ones do.
type recorder struct {
	testing.TB
	logs    []string
	failed  string
	skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, a ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, a...))
}

func (r *recorder) Fatalf(format string, a ...any) {
	r.failed = fmt.Sprintf(format, a...)
	panic(stop{})
}

func (r *recorder) Skipf(format string, a ...any) {
	r.skipped = fmt.Sprintf(format, a...)
	panic(stop{})
}

type stop struct{}

// call runs f with r, turning a Fatalf or Skipf into a return.
func call(r *recorder, f func()) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stop); !ok {
				panic(v)
			}
		}
	}()
	f()
}

func TestPart(t *testing.T) {
	missing := errors.New("not found on PATH (Debian: apt-get install chromium)")
	for _, tc := range []struct {
		name, ci    string
		err         error
		fail, skip  bool
		wantMessage string
	}{
		{name: "present", ci: "true"},
		{name: "missing in CI fails", ci: "true", err: missing, fail: true, wantMessage: "Chromium missing: not found on PATH (Debian: apt-get install chromium) (CI=true"},
		{name: "missing with CI=1 fails", ci: "1", err: missing, fail: true, wantMessage: "Chromium missing"},
		{name: "missing outside CI skips", ci: "", err: missing, skip: true, wantMessage: "Chromium missing: not found on PATH (Debian: apt-get install chromium)"},
		{name: "CI=false skips", ci: "false", err: missing, skip: true, wantMessage: "Chromium missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvCI, tc.ci)
			r := &recorder{TB: t}
			call(r, func() { Part(r, "Chromium", tc.err) })
			if (r.failed != "") != tc.fail || (r.skipped != "") != tc.skip {
				t.Fatalf("failed %q, skipped %q; want fail %v, skip %v", r.failed, r.skipped, tc.fail, tc.skip)
			}
			if got := r.failed + r.skipped; !strings.HasPrefix(got, tc.wantMessage) {
				t.Errorf("message %q, want it to start with %q", got, tc.wantMessage)
			}
		})
	}
}

func TestValidRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		invalid  []string // why attempt n (1-based) is INVALID; "" valid
		want     int      // the attempt whose result is returned; 0 when tb failed
		reruns   int
		failWith []string
	}{
		{name: "valid at once", invalid: []string{""}, want: 1},
		{name: "valid on the rerun", invalid: []string{"generator 3.1 % late", ""}, want: 2, reruns: 1},
		{name: "invalid twice fails", invalid: []string{"generator 3.1 % late", "postgres used 78 %"}, reruns: 1,
			failWith: []string{"run 1: generator 3.1 % late", "run 2: postgres used 78 %"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			var got, calls int
			call(r, func() {
				got = ValidRun(r, func(n int) (int, string) {
					calls++
					return n, tc.invalid[n-1]
				})
			})
			if got != tc.want || calls > 2 {
				t.Errorf("returned attempt %d after %d calls, want attempt %d", got, calls, tc.want)
			}
			reruns := 0
			for _, l := range r.logs {
				if strings.HasPrefix(l, RerunMarker) {
					reruns++
				}
			}
			if reruns != tc.reruns {
				t.Errorf("%d rerun lines %q, want %d", reruns, r.logs, tc.reruns)
			}
			for _, w := range tc.failWith {
				if !strings.Contains(r.failed, w) {
					t.Errorf("failure %q does not say %q", r.failed, w)
				}
			}
			if len(tc.failWith) == 0 && r.failed != "" {
				t.Errorf("failed: %s", r.failed)
			}
		})
	}
}
