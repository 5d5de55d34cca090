package scenario

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Manual is the value of a fault's at: or for: that leaves the start or
// the end of the fault to an operator (drill run --ui).
const Manual = "manual"

// manualMarks records which faults said at: manual or for: manual, by
// index in the faults list.
type manualMarks struct {
	start, end map[int]bool
}

// takeManual finds faults[i].at and faults[i].for written "manual" in the
// document root, replaces them with 0s so that the strict decoder reads a
// duration, and returns where they were.
func takeManual(root *yaml.Node) manualMarks {
	m := manualMarks{start: map[int]bool{}, end: map[int]bool{}}
	if root == nil || root.Kind != yaml.MappingNode {
		return m
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "faults" || root.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for fi, f := range root.Content[i+1].Content {
			if f.Kind != yaml.MappingNode {
				continue
			}
			for k := 0; k+1 < len(f.Content); k += 2 {
				key, val := f.Content[k].Value, f.Content[k+1]
				if val.Kind != yaml.ScalarNode || val.Value != Manual || (key != "at" && key != "for") {
					continue
				}
				val.Value, val.Tag, val.Style = "0s", "!!str", 0
				if key == "at" {
					m.start[fi] = true
				} else {
					m.end[fi] = true
				}
			}
		}
	}
	return m
}

// apply sets ManualStart and ManualEnd on the decoded faults.
func (m manualMarks) apply(s *Scenario) {
	for i := range s.Faults {
		s.Faults[i].ManualStart = m.start[i]
		s.Faults[i].ManualEnd = m.end[i]
	}
}

// Scheduled reports whether the fault starts on the timeline (not at:
// manual).
func (f Fault) Scheduled() bool { return !f.ManualStart }

// validateManual checks a fault with at: manual or for: manual where the
// scheduled checks do not apply: a manual start leaves for: to run from
// the moment it starts (above 0, unless manual too); a manual end needs
// its start inside the run.
func (v *validator) validateManual(p string, f Fault) {
	t := v.s.Timeline
	if !f.ManualEnd && f.For.D() <= 0 {
		v.errorf(p+".for", "for must be above 0 (or manual)")
	}
	if f.ManualStart {
		return
	}
	switch on := f.At.D(); {
	case on < t.Warmup.D():
		v.errorf(p+".at", "fault starts (%s) inside the warmup (%s); start it at or after the warmup", on, t.Warmup.D())
	case on >= t.Duration.D():
		v.errorf(p+".at", "fault starts (%s) after the run (duration %s)", on, t.Duration.D())
	}
}

// manualSpan is a fault's window before the run: [at, at+for) when
// scheduled; a manual start may come any time after warmup and a manual
// end any time before the run ends, so their windows span what is
// possible until the run follows the actual times.
func manualSpan(f Fault, t Timeline) (on, off time.Duration) {
	on, off = f.At.D(), f.At.D()+f.For.D()
	if f.ManualStart {
		on = t.Warmup.D()
		off = t.Duration.D()
	}
	if f.ManualEnd {
		off = t.Duration.D()
	}
	return on, off
}

// manualSchema lets a fault's at and for be "manual" in the JSON Schema.
func manualSchema(defs map[string]any) {
	f, ok := defs["Fault"].(map[string]any)
	if !ok {
		return
	}
	props, ok := f["properties"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range []string{"at", "for"} {
		p, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		alt := map[string]any{"const": Manual}
		if ref, ok := p["allOf"]; ok {
			p["anyOf"] = []any{map[string]any{"allOf": ref}, alt}
			delete(p, "allOf")
		} else if ref, ok := p["$ref"]; ok {
			p["anyOf"] = []any{map[string]any{"$ref": ref}, alt}
			delete(p, "$ref")
		}
	}
}
