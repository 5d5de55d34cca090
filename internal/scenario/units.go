package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time span written as a Go duration string ("250ms", "15s",
// "2m"). A bare number is refused: the unit must be explicit.
type Duration struct{ time.Duration }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return d.Duration }

// ParseDuration parses "250ms", "15s", "1m30s"; it refuses bare numbers and
// negative values.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Duration{}, fmt.Errorf("empty duration; write e.g. 250ms or 15s")
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return Duration{}, fmt.Errorf("duration %q has no unit; write e.g. %sms or %ss", s, s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q; write e.g. 250ms, 15s or 2m", s)
	}
	if d < 0 {
		return Duration{}, fmt.Errorf("duration %q is negative", s)
	}
	return Duration{d}, nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a duration such as 250ms or 15s")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.Duration.String(), nil }

// Rate is Freq requests per Per, written "2800/s", "1400/1s", "90/m",
// "5/100ms". It mirrors vegeta's ConstantPacer. The zero value is unset.
type Rate struct {
	Freq int           `json:"freq"`
	Per  time.Duration `json:"per"`
}

// PerSecond returns the rate in req/s.
func (r Rate) PerSecond() float64 {
	if r.Per <= 0 {
		return 0
	}
	return float64(r.Freq) / r.Per.Seconds()
}

// String renders the rate as "<freq>/<per>".
func (r Rate) String() string {
	switch r.Per {
	case time.Second:
		return fmt.Sprintf("%d/s", r.Freq)
	case time.Minute:
		return fmt.Sprintf("%d/m", r.Freq)
	case time.Hour:
		return fmt.Sprintf("%d/h", r.Freq)
	}
	return fmt.Sprintf("%d/%s", r.Freq, r.Per)
}

// ParseRate parses "2800/s", "1400/1s", "90/m", "5/100ms". The frequency is
// a non-negative integer; the period is s, m, h or a Go duration.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	freq, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("invalid rate %q; write e.g. 2800/s, 1400/1s or 90/m", s)
	}
	f, err := strconv.Atoi(strings.TrimSpace(freq))
	if errors.Is(err, strconv.ErrRange) {
		return Rate{}, fmt.Errorf("invalid rate %q: %s requests is out of range", s, strings.TrimSpace(freq))
	}
	if err != nil || f < 0 {
		return Rate{}, fmt.Errorf("invalid rate %q: %q is not a whole number of requests", s, freq)
	}
	var p time.Duration
	switch strings.TrimSpace(per) {
	case "s":
		p = time.Second
	case "m":
		p = time.Minute
	case "h":
		p = time.Hour
	default:
		p, err = time.ParseDuration(strings.TrimSpace(per))
		if err != nil || p <= 0 {
			return Rate{}, fmt.Errorf("invalid rate %q: period %q must be s, m, h or a duration such as 1s", s, per)
		}
	}
	return Rate{Freq: f, Per: p}, nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a rate such as 2800/s")
	}
	v, err := ParseRate(n.Value)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalYAML writes the rate as "<freq>/<per>".
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// ByteSize is a size in bytes written "512", "64KiB", "1MiB", "10KB", "2MB".
type ByteSize int64

// ParseByteSize parses a plain byte count or one with a unit (B, KB, MB,
// GB: powers of 1000; KiB, MiB, GiB: powers of 1024).
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid byte size %q; write e.g. 512, 64KiB or 1MB", s)
	}
	mult := map[string]int64{"": 1, "B": 1, "KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("invalid byte size %q: unknown unit %q; known: B, KB, MB, GB, KiB, MiB, GiB", s, unit)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("byte size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a byte size such as 64KiB")
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Percentile is a percentile in (0, 100], written "p99", "p99.9", "99" or "50".
type Percentile float64

// ParsePercentile parses "p99", "p99.9", "99.9"; the value must be in (0, 100].
func ParsePercentile(s string) (Percentile, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "p")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("invalid percentile %q; write e.g. p99 or p99.9", s)
	}
	if v <= 0 || v > 100 {
		return 0, fmt.Errorf("percentile %q out of range: must be above 0 and at most 100", s)
	}
	return Percentile(v), nil
}

// String renders "p99", "p99.9".
func (p Percentile) String() string {
	return "p" + strconv.FormatFloat(float64(p), 'f', -1, 64)
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Percentile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a percentile such as p99")
	}
	v, err := ParsePercentile(n.Value)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalYAML writes the percentile as "p99".
func (p Percentile) MarshalYAML() (any, error) { return p.String(), nil }

// CPUQuantity is an amount of CPU in thousandths of a core (millicores),
// written as Kubernetes writes a CPU quantity: "500m" (half a core), "1",
// "1.5", "0.25". The zero value is unset.
type CPUQuantity int64

// maxCPUMillis bounds a CPU quantity: 100,000 cores, far beyond any
// machine, so that a mistyped unit is refused rather than overflowing.
const maxCPUMillis = 100_000 * 1000

// ParseCPUQuantity parses a Kubernetes CPU quantity: a whole number of
// millicores with the suffix m ("500m"), or a decimal number of cores
// ("1", "1.5", "0.25") with at most three decimals, since 1m is the finest
// CPU amount Kubernetes keeps. It must be above 0. Errors name the value
// and say how to write it.
func ParseCPUQuantity(s string) (CPUQuantity, error) {
	t := strings.TrimSpace(s)
	bad := func(why string) (CPUQuantity, error) {
		return 0, fmt.Errorf("invalid CPU quantity %q: %s; write millicores such as 500m or cores such as 1 or 1.5", s, why)
	}
	if t == "" {
		return bad("empty")
	}
	digits := func(x string) bool {
		if x == "" || len(x) > 12 {
			return false
		}
		for _, c := range x {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	var milli int64
	if m, ok := strings.CutSuffix(t, "m"); ok {
		if !digits(m) {
			return bad("millicores must be a whole number")
		}
		milli, _ = strconv.ParseInt(m, 10, 64)
	} else {
		whole, frac, hasFrac := strings.Cut(t, ".")
		if whole == "" && hasFrac {
			whole = "0"
		}
		if !digits(whole) || (hasFrac && !digits(frac)) {
			return bad("not a number of cores")
		}
		if len(frac) > 3 {
			return bad("finer than 1m (0.001 of a core)")
		}
		w, _ := strconv.ParseInt(whole, 10, 64)
		f := int64(0)
		if frac != "" {
			f, _ = strconv.ParseInt(frac+strings.Repeat("0", 3-len(frac)), 10, 64)
		}
		milli = w*1000 + f
	}
	if milli <= 0 {
		return bad("must be above 0")
	}
	if milli > maxCPUMillis {
		return bad("above drill's limit of 100000 cores")
	}
	return CPUQuantity(milli), nil
}

// Millis returns the quantity in millicores (1000 = one core).
func (q CPUQuantity) Millis() int64 { return int64(q) }

// Cores returns the quantity in cores.
func (q CPUQuantity) Cores() float64 { return float64(q) / 1000 }

// String renders the quantity as Kubernetes does: "1", "2" for whole
// cores, "500m", "1500m" otherwise.
func (q CPUQuantity) String() string {
	if q%1000 == 0 {
		return strconv.FormatInt(int64(q)/1000, 10)
	}
	return strconv.FormatInt(int64(q), 10) + "m"
}

// UnmarshalYAML implements yaml.Unmarshaler; a YAML number (1, 0.5) or
// string ("500m") is accepted.
func (q *CPUQuantity) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a CPU quantity such as 500m or 1.5")
	}
	v, err := ParseCPUQuantity(n.Value)
	if err != nil {
		return err
	}
	*q = v
	return nil
}

// MarshalYAML writes the quantity as "500m" or "1".
func (q CPUQuantity) MarshalYAML() (any, error) { return q.String(), nil }

// MarshalJSON writes the quantity as "500m" or "1".
func (q CPUQuantity) MarshalJSON() ([]byte, error) { return json.Marshal(q.String()) }

// UnmarshalJSON reads "500m", "1.5" or a number.
func (q *CPUQuantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f json.Number
		if err2 := json.Unmarshal(b, &f); err2 != nil {
			return err
		}
		s = f.String()
	}
	v, err := ParseCPUQuantity(s)
	if err != nil {
		return err
	}
	*q = v
	return nil
}

// IntOrPercent is a number of pods written as a count ("1", 2) or as a
// percentage of the declared replicas ("25%"), as a Deployment's
// maxSurge and maxUnavailable are. The zero value is a count of 0.
type IntOrPercent struct {
	// N is the count, or the percentage when Percent is set.
	N int
	// Percent: N is a percentage (0..100) of the replicas.
	Percent bool
}

// ParseIntOrPercent parses "3" or "25%": a whole count >= 0, or a whole
// percentage from 0 to 100.
func ParseIntOrPercent(s string) (IntOrPercent, error) {
	t := strings.TrimSpace(s)
	num, pct := strings.CutSuffix(t, "%")
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 {
		return IntOrPercent{}, fmt.Errorf("invalid count or percentage %q; write e.g. 1 or 25%%", s)
	}
	if pct && v > 100 {
		return IntOrPercent{}, fmt.Errorf("percentage %q out of range: at most 100%%", s)
	}
	return IntOrPercent{N: v, Percent: pct}, nil
}

// String renders "3" or "25%".
func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(v.N) + "%"
	}
	return strconv.Itoa(v.N)
}

// Of resolves v against total pods as the Deployment controller does: a
// percentage of total rounded up (roundUp, maxSurge) or down
// (maxUnavailable); a count as it is.
func (v IntOrPercent) Of(total int, roundUp bool) int {
	if !v.Percent {
		return v.N
	}
	if roundUp {
		return (total*v.N + 99) / 100
	}
	return total * v.N / 100
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (v *IntOrPercent) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a count such as 1 or a percentage such as 25%%")
	}
	x, err := ParseIntOrPercent(n.Value)
	if err != nil {
		return err
	}
	*v = x
	return nil
}

// MarshalYAML writes "3" as a number and "25%" as a string.
func (v IntOrPercent) MarshalYAML() (any, error) {
	if v.Percent {
		return v.String(), nil
	}
	return v.N, nil
}

// MarshalJSON writes "3" as a number and "25%" as a string.
func (v IntOrPercent) MarshalJSON() ([]byte, error) {
	if v.Percent {
		return json.Marshal(v.String())
	}
	return json.Marshal(v.N)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *IntOrPercent) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = strings.TrimSpace(string(b))
	}
	x, err := ParseIntOrPercent(s)
	if err != nil {
		return err
	}
	*v = x
	return nil
}
