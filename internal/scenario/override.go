package scenario

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// OverrideAssertion applies one "<assertion>.<field>=<value>" setting (the
// `drill report --set` syntax) to the assertion of that name in as, in
// place. field is the assertion's YAML key (maxLatency, maxRate, max,
// minReady, percentile, minRatio, retryAfter, hold, within, value, op,
// window, statusClass, status, labels, maxP99Ratio, maxErrorRateDelta,
// ...) and value is written as in a scenario file ("150ms", "0.01",
// "p99.9", "[503]"). It returns an error naming what is wrong when the
// setting is malformed, the assertion is unknown, the field is unknown
// (with the nearest key, as scenario files get) or not settable (name,
// type), or the value does not parse. Range and applicability checks are
// the caller's: [Scenario.Validate] on the changed scenario.
func OverrideAssertion(as []Assertion, setting string) error {
	key, value, ok := strings.Cut(setting, "=")
	if !ok {
		return fmt.Errorf("parse setting %q: want <assertion>.<field>=<value>", setting)
	}
	i := strings.LastIndex(key, ".")
	if i <= 0 || i == len(key)-1 {
		return fmt.Errorf("parse setting %q: want <assertion>.<field>=<value>", setting)
	}
	name, field := key[:i], key[i+1:]
	if field == "name" || field == "type" {
		return fmt.Errorf("set %s: the assertion's %s cannot be changed", key, field)
	}
	if msg, unknown := UnknownKey(Assertion{}, field); unknown {
		return fmt.Errorf("set %s: %s", key, msg)
	}
	var names []string
	for j := range as {
		if as[j].ResolvedName() != name {
			names = append(names, as[j].ResolvedName())
			continue
		}
		a, err := withField(as[j], field, value)
		if err != nil {
			return fmt.Errorf("set %s=%s: %w", key, value, err)
		}
		as[j] = a
		return nil
	}
	return fmt.Errorf("set %s: no assertion named %q; assertions: %s", key, name, strings.Join(names, ", "))
}

// withField returns a fresh copy of a (sharing no pointers with it) with
// the YAML key field set to value, decoded strictly.
func withField(a Assertion, field, value string) (Assertion, error) {
	b, err := yaml.Marshal(a)
	if err != nil {
		return a, fmt.Errorf("encode assertion: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return a, fmt.Errorf("decode assertion: %w", err)
	}
	var val yaml.Node
	if err := yaml.Unmarshal([]byte(value), &val); err != nil {
		return a, fmt.Errorf("parse value: %w", err)
	}
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	if val.Kind == yaml.DocumentNode && len(val.Content) == 1 {
		v = val.Content[0]
	}
	m := doc.Content[0]
	replaced := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == field {
			m.Content[i+1] = v
			replaced = true
		}
	}
	if !replaced {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: field}, v)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return a, fmt.Errorf("encode assertion: %w", err)
	}
	var fresh Assertion
	dec := yaml.NewDecoder(strings.NewReader(string(out)))
	dec.KnownFields(true)
	if err := dec.Decode(&fresh); err != nil {
		return a, err
	}
	return fresh, nil
}

// ResolvedName returns a's name, or "<type>-<window>" when it has none
// (the scenario default; the window defaults to [DefaultWindow]).
func (a Assertion) ResolvedName() string {
	if a.Name != "" {
		return a.Name
	}
	w := a.Window
	if w == "" {
		w = DefaultWindow
	}
	return string(a.Type) + "-" + w
}
