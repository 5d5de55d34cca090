// Package needs decides what a test does when a real part it needs is
// missing, or when a drill it runs comes back INVALID.
//
// drill's tests are its proof that it tells a good build from a bad one,
// so under CI (the environment variable CI set to true, as `.ci/run`
// does) a missing part fails the test, naming the part and how to get it,
// and a drill that stays INVALID after one rerun fails with its validity
// message. Outside CI a missing part skips the test, saying the same, so a
// developer without Chromium can still run the rest.
//
// Both outcomes leave a line that `make test`'s summary (tools/testsum)
// reads: a skip by its reason, a rerun by [RerunMarker].
package needs

import (
	"os"
	"strconv"
	"testing"
)

// EnvCI is the environment variable that says the tests run as the CI
// gate ("true", "1": anything strconv.ParseBool reads as true).
const EnvCI = "CI"

// RerunMarker starts the log line of a rerun; tools/testsum counts the
// lines that contain it.
const RerunMarker = "drill-test-rerun:"

// InCI reports whether the tests run as the CI gate ([EnvCI] is true).
func InCI() bool {
	ok, err := strconv.ParseBool(os.Getenv(EnvCI))
	return err == nil && ok
}

// Part returns when err is nil. Otherwise the real part named by part
// (e.g. "PostgreSQL server binaries", "Docker engine") is missing: under CI
// tb fails, elsewhere it is skipped; either way the message names the part
// and carries err, which should say how to install it.
func Part(tb testing.TB, part string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if InCI() {
		tb.Fatalf("%s missing: %v (%s=true: a proof test may not skip for a missing part)", part, err, EnvCI)
	}
	tb.Skipf("%s missing: %v", part, err)
}

// ValidRun calls attempt (n is 1, then 2) and returns its result. attempt
// returns why its drill was INVALID ("" when the measurement was valid):
// a first INVALID is logged with [RerunMarker] and run once more; a second
// fails tb with both reasons. A gate that turns green because the machine
// was busy is not a gate, so an INVALID run never skips.
func ValidRun[T any](tb testing.TB, attempt func(n int) (T, string)) T {
	tb.Helper()
	res, why := attempt(1)
	if why == "" {
		return res
	}
	tb.Logf("%s the drill came back INVALID, running it once more: %s", RerunMarker, why)
	res, again := attempt(2)
	if again != "" {
		tb.Fatalf("the drill came back INVALID twice, so it gave no verdict to check:\n  run 1: %s\n  run 2: %s", why, again)
	}
	return res
}
