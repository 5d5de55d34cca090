// Package goroutines reads the pprof labels of live goroutines, for tests
// that check which part of drill a goroutine is charged to.
package goroutines

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"strings"
)

// Labels returns, for every group of live goroutines whose stack holds a
// frame whose function name contains fn, the value of label key ("" for
// a group without it). It returns an error when the goroutine profile
// cannot be written or its labels cannot be parsed.
func Labels(fn, key string) ([]string, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil, fmt.Errorf("write goroutine profile: %w", err)
	}
	var out []string
	// debug=1: groups separated by blank lines; "# labels: {...}" after
	// the count line, then "#\t0x...\tfunc+0x..\tfile:line" frames.
	for group := range strings.SplitSeq(buf.String(), "\n\n") {
		holds := false
		labels := map[string]string{}
		for line := range strings.SplitSeq(group, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				if err := json.Unmarshal([]byte(l), &labels); err != nil {
					return nil, fmt.Errorf("parse goroutine labels %q: %w", l, err)
				}
				continue
			}
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && strings.Contains(f[2], fn) {
				holds = true
			}
		}
		if holds {
			out = append(out, labels[key])
		}
	}
	return out, nil
}
