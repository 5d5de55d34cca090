package inject

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// ToxicPrefix starts the name of every toxic drill creates.
const ToxicPrefix = "drill-"

// NewRunID returns a fresh run id: UTC start time and 24 random bits,
// "20261130.075700.3fa2c1". Run ids contain no '-', so a toxic name
// drill-<run>-<fault> splits unambiguously.
func NewRunID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102.150405") + "." + hex.EncodeToString(b)
}

// ValidRunID checks that id is non-empty and uses only a-z, 0-9 and '.'.
func ValidRunID(id string) error {
	if id == "" {
		return fmt.Errorf("run id is empty")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.') {
			return fmt.Errorf("run id %q has %q; use a-z, 0-9 and '.'", id, r)
		}
	}
	return nil
}

// RunPrefix is the prefix of every toxic of one run: "drill-<run>-".
func RunPrefix(runID string) string { return ToxicPrefix + runID + "-" }

// ToxicName is drill-<run>-<fault>, plus "-up" or "-down" when suffix is
// set (stream both).
func ToxicName(runID, fault, suffix string) string {
	n := RunPrefix(runID) + fault
	if suffix != "" {
		n += "-" + suffix
	}
	return n
}

// RunOfToxic returns the run id inside a drill toxic name, and false for a
// name drill did not make.
func RunOfToxic(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, ToxicPrefix)
	if !ok {
		return "", false
	}
	run, _, ok := strings.Cut(rest, "-")
	if !ok || ValidRunID(run) != nil {
		return "", false
	}
	return run, true
}
