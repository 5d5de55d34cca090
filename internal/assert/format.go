package assert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FormatDuration renders d for people with about three significant
// figures: "850µs", "4.20ms", "412ms", "1.25s", "2m05s".
func FormatDuration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d == 0:
		s = "0ms"
	case d < time.Millisecond:
		s = fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		s = fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		s = fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		s = fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		s = fmt.Sprintf("%.2fs", d.Seconds())
	default:
		m := int(d / time.Minute)
		s = fmt.Sprintf("%dm%05.2fs", m, (d - time.Duration(m)*time.Minute).Seconds())
	}
	if neg {
		return "-" + s
	}
	return s
}

// FormatOffset renders a run-clock offset as "t=12.345s".
func FormatOffset(d time.Duration) string {
	return fmt.Sprintf("t=%.3fs", d.Seconds())
}

// FormatPercent renders a ratio 0..1 as a percentage: "0%", "0.12%",
// "5.00%", "0.0036%", "12.5%".
func FormatPercent(r float64) string {
	if r == 0 {
		return "0%"
	}
	p := r * 100
	switch {
	case p >= 10:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	case p >= 0.01:
		return strconv.FormatFloat(p, 'f', 2, 64) + "%"
	}
	return strconv.FormatFloat(p, 'g', 3, 64) + "%"
}

// FormatRatio renders a plain ratio with up to four decimals: "0.9987".
func FormatRatio(r float64) string { return strconv.FormatFloat(r, 'f', 4, 64) }

// FormatValue renders a metric sample compactly: "4", "0.25", "1.2e+06".
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func durFigure(name string, d time.Duration) Figure {
	return Figure{Name: name, Value: round(ms(d), 3), Unit: "ms", Text: FormatDuration(d)}
}

func countFigure(name string, n int, noun string) Figure {
	return Figure{Name: name, Value: float64(n), Unit: "count", Text: plural(n, noun)}
}

func ratioFigure(name string, r float64, text string) Figure {
	return Figure{Name: name, Value: round(r, 6), Unit: "ratio", Text: text}
}

// round rounds v to n decimals, keeping JSON output stable.
func round(v float64, n int) float64 {
	p := math.Pow(10, float64(n))
	return math.Round(v*p) / p
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// knownNames lists m's keys for an error message: sorted and joined with
// ", ", or "none" when m is empty.
func knownNames[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// labelString renders labels as {a="1",b="2"} in key order.
func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// nearestRank returns the p-th percentile (p in (0,100]) of sorted values
// by the nearest-rank method: the smallest value with at least p% of the
// values at or below it. With few values (pods) p99 is the maximum.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}
