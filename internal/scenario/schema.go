package scenario

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
)

// SchemaID is the $id of the scenario JSON Schema.
const SchemaID = "https://drill.dev/schemas/v1alpha1/scenario.schema.json"

// Patterns of the unit types, as the schema states them.
const (
	DurationPattern   = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	RatePattern       = `^\s*[0-9]+\s*/\s*(s|m|h|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)\s*$`
	ByteSizePattern   = `^\s*[0-9]+\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$`
	PercentilePattern = `^p?(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)$`
	CPUPattern        = `^([0-9]+m|[0-9]*\.?[0-9]{1,3}|[0-9]+)$`
	// IntOrPercentPattern is a count or a whole percentage (IntOrPercent).
	IntOrPercentPattern = `^\s*[0-9]+%?\s*$`
)

// enums lists the allowed values of enumerated keys, by "Type.key".
func enums() map[string][]string {
	return map[string][]string{
		"Environment.type":      EnvironmentTypes,
		"LocalEnv.sutPriority":  SUTPriorities,
		"PostgresDep.mode":      PostgresModes,
		"Service.reference":     ReferenceServices,
		"Service.build":         Builds,
		"Service.balancing":     Balancings,
		"PortHandoff.format":    PortFormats,
		"HTTPGetAction.scheme":  HTTPSchemes,
		"TargetsFile.format":    TargetsFormats,
		"Retry.policy":          RetryPolicies,
		"Fault.type":            FaultTypes,
		"Fault.stream":          FaultStreams,
		"StopCondition.action":  StopActions,
		"Fault.signal":          PodKillSignals,
		"Assertion.type":        AssertionTypes,
		"Assertion.statusClass": StatusClasses,
		"Assertion.op":          MetricOps,
		"Claim.figure":          ClaimFigures,
	}
}

// unitTypes are the types written as strings with units.
var unitTypes = map[reflect.Type]bool{
	reflect.TypeFor[Duration]():     true,
	reflect.TypeFor[Rate]():         true,
	reflect.TypeFor[ByteSize]():     true,
	reflect.TypeFor[Percentile]():   true,
	reflect.TypeFor[CPUQuantity]():  true,
	reflect.TypeFor[IntOrPercent](): true,
}

// JSONSchema returns a JSON Schema (draft 2020-12) of the scenario format,
// generated from the Go types, with the types' doc comments as
// descriptions. Unit types are strings with patterns (a bare 0 duration,
// byte count or percentile number is also allowed, as the decoder allows).
func JSONSchema() ([]byte, error) {
	defs := map[string]any{
		"Duration": map[string]any{
			"description": "A duration with its unit, e.g. 250ms, 15s, 2m, 1m30s (a bare number other than 0 is refused).",
			"anyOf": []any{
				map[string]any{"type": "string", "pattern": DurationPattern},
				map[string]any{"const": 0},
			},
		},
		"Rate": map[string]any{
			"description": "Requests per period: 2800/s, 1400/1s, 90/m, 5/100ms.",
			"type":        "string", "pattern": RatePattern,
		},
		"ByteSize": map[string]any{
			"description": "Bytes, plain or with a unit: 512, 64KiB, 1MiB, 10KB (KB, MB, GB are powers of 1000; KiB, MiB, GiB of 1024).",
			"anyOf": []any{
				map[string]any{"type": "string", "pattern": ByteSizePattern},
				map[string]any{"type": "integer", "minimum": 0},
			},
		},
		"Percentile": map[string]any{
			"description": "A percentile above 0 and at most 100: p99, p99.9, 50.",
			"anyOf": []any{
				map[string]any{"type": "string", "pattern": PercentilePattern},
				map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": 100},
			},
		},
	}
	defs["CPUQuantity"] = map[string]any{
		"description": "CPU as Kubernetes writes it: millicores 500m, or cores 1, 1.5, 0.25 (at most three decimals); above 0.",
		"anyOf": []any{
			map[string]any{"type": "string", "pattern": CPUPattern},
			map[string]any{"type": "number", "exclusiveMinimum": 0},
		},
	}
	defs["IntOrPercent"] = map[string]any{
		"description": "Pods as a count (1) or a whole percentage of the replicas (25%), as a Deployment's maxSurge.",
		"anyOf": []any{
			map[string]any{"type": "string", "pattern": IntOrPercentPattern},
			map[string]any{"type": "integer", "minimum": 0},
		},
	}
	en := enums()
	root := schemaStruct(reflect.TypeFor[Scenario](), defs, en)
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "drill scenario (" + APIVersion + ")"
	props := root["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"const": APIVersion, "description": "Always " + APIVersion + "."}
	props["kind"] = map[string]any{"const": KindScenario, "description": "Always " + KindScenario + "."}
	manualSchema(defs)
	root["$defs"] = defs
	return json.MarshalIndent(root, "", "  ")
}

// schemaStruct returns the object schema of struct type t, registering the
// types it uses in defs.
func schemaStruct(t reflect.Type, defs map[string]any, en map[string][]string) map[string]any {
	si := infoFor(t)
	props := map[string]any{}
	var required []string
	for _, f := range si.fields {
		ft := t.Field(f.index).Type
		p := schemaType(ft, defs, en)
		if vals, ok := en[t.Name()+"."+f.name]; ok {
			p = map[string]any{"type": "string", "enum": vals}
		}
		if d := fieldDocs[t.Name()+"."+f.name]; d != "" {
			if _, isRef := p["$ref"]; isRef {
				p = map[string]any{"allOf": []any{p}}
			}
			p["description"] = d
		}
		props[f.name] = p
		if f.required {
			required = append(required, f.name)
		}
	}
	out := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	if d := typeDocs[t.Name()]; d != "" {
		out["description"] = d
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func schemaType(t reflect.Type, defs map[string]any, en map[string][]string) map[string]any {
	if unitTypes[t] {
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaType(t.Elem(), defs, en)
	case reflect.Struct:
		if _, ok := defs[t.Name()]; !ok {
			defs[t.Name()] = nil // mark before recursing
			defs[t.Name()] = schemaStruct(t, defs, en)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaType(t.Elem(), defs, en)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaType(t.Elem(), defs, en)}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Interface:
		return map[string]any{"type": []string{"integer", "string"}}
	}
	return map[string]any{}
}

// walkTypes calls fn for every YAML key reachable from struct type t, once
// per type.
func walkTypes(t reflect.Type, seen map[reflect.Type]bool, fn func(t reflect.Type, key string)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || unitTypes[t] || seen[t] {
		return
	}
	seen[t] = true
	si := infoFor(t)
	for _, f := range si.fields {
		fn(t, f.name)
		walkTypes(t.Field(f.index).Type, seen, fn)
	}
}

// WriteReference writes the scenario reference in Markdown: one table per
// type (keys in declaration order, the unit or type of each value, whether
// it is required, and its doc comment with the default). docs/reference.md
// holds its output.
func WriteReference(w io.Writer) error {
	var b strings.Builder
	en := enums()
	var order []reflect.Type
	listed := map[reflect.Type]bool{}
	walkTypes(reflect.TypeFor[Scenario](), map[reflect.Type]bool{}, func(t reflect.Type, key string) {
		if !listed[t] {
			listed[t] = true
			order = append(order, t)
		}
	})
	for _, t := range order {
		fmt.Fprintf(&b, "#### %s\n\n", t.Name())
		if d := typeDocs[t.Name()]; d != "" {
			fmt.Fprintf(&b, "%s\n\n", d)
		}
		b.WriteString("| key | value | default | meaning |\n|---|---|---|---|\n")
		si := infoFor(t)
		for _, f := range si.fields {
			val := valueName(t.Field(f.index).Type)
			if vals, ok := en[t.Name()+"."+f.name]; ok {
				val = "`" + strings.Join(vals, "` \\| `") + "`"
			}
			doc := fieldDocs[t.Name()+"."+f.name]
			switch {
			case t.Name() == "Scenario" && f.name == "apiVersion":
				doc = "Always `" + APIVersion + "`."
			case t.Name() == "Scenario" && f.name == "kind":
				doc = "Always `" + KindScenario + "`."
			}
			def := defaultOf(doc)
			if f.required {
				def = "required"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.name, val, mdEscape(def), mdEscape(doc))
		}
		b.WriteString("\n")
	}
	writeFaultKinds(&b)
	writeAssertionKinds(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFaultKinds writes the reference of each fault kind from its spec:
// a summary table, then per kind its doc and example.
func writeFaultKinds(b *strings.Builder) {
	b.WriteString("#### Fault kinds\n\n")
	b.WriteString("A fault's `type` is one of these kinds. Toxics act on a proxy in the direction `stream` " +
		"names (default downstream) on the share `toxicity` of its connections (default 1); the other kinds " +
		"take a proxy or a dependency out as a whole and take neither.\n\n")
	b.WriteString("| type | acts on | Toxiproxy toxic | keys |\n|---|---|---|---|\n")
	for _, sp := range faultSpecs {
		toxic := "no"
		if sp.IsToxic() {
			toxic = "`" + sp.Toxic + "`"
		}
		var keys []string
		for _, a := range sp.Attrs {
			keys = append(keys, keyCell(a.Key, a.Required))
		}
		fmt.Fprintf(b, "| [`%s`](#fault-%s) | `%s` | %s | %s |\n", sp.Type, anchor(string(sp.Type)), sp.Target, toxic, orNone(keys))
	}
	b.WriteString("\n")
	for _, sp := range faultSpecs {
		fmt.Fprintf(b, "##### fault `%s`\n\n%s\n\n```yaml\nfaults:\n%s\n```\n\n", sp.Type, mdEscape(sp.Doc), indent(sp.Example))
	}
}

// writeAssertionKinds writes the reference of each assertion kind from its
// spec: a summary table, then per kind its doc and example.
func writeAssertionKinds(b *strings.Builder) {
	b.WriteString("#### Assertion kinds\n\n")
	b.WriteString("An assertion's `type` is one of these kinds; each also takes `name`, `window` (default run) " +
		"and `source`. The game-day console (`drill run --ui`) judges each kind while the run lives as the " +
		"last column says, a provisional verdict on the data so far; the run's end judges every kind.\n\n")
	b.WriteString("| type | keys | judged live |\n|---|---|---|\n")
	for _, sp := range assertionSpecs {
		var keys []string
		for _, f := range sp.Fields {
			keys = append(keys, keyCell(f.Key, f.Required))
		}
		fmt.Fprintf(b, "| [`%s`](#assertion-%s) | %s | %s |\n", sp.Type, anchor(string(sp.Type)), orNone(keys), sp.Live.liveText())
	}
	b.WriteString("\n")
	for _, sp := range assertionSpecs {
		fmt.Fprintf(b, "##### assertion `%s`\n\n%s\n\n```yaml\nassertions:\n%s\n```\n\n", sp.Type, mdEscape(sp.Doc), indent(sp.Example))
	}
}

// keyCell renders a kind's key for a summary table.
func keyCell(key string, required bool) string {
	if required {
		return "`" + key + "` (required)"
	}
	return "`" + key + "`"
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// anchor is the GitHub heading anchor of a kind name after its "fault " or
// "assertion " prefix (lower case; characters other than letters, digits,
// '-' and '_' dropped).
func anchor(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return -1
	}, name)
}

// indent indents each line of a YAML example by two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

var (
	defaultRE      = regexp.MustCompile(`(?i)\bdefault(?: is|:)?\s+([^;]+?)(?:;|\.\s|\.$|$)`)
	parenDefaultRE = regexp.MustCompile(`([\w./-]+) \(default\)`)
)

// defaultOf pulls the default out of a field's doc comment ("default 10s",
// "Default: local", "correct (default)"), or "" when it states none.
func defaultOf(doc string) string {
	if m := parenDefaultRE.FindStringSubmatch(doc); m != nil {
		return m[1]
	}
	if m := defaultRE.FindStringSubmatch(doc); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

// mdEscape makes doc text safe in a Markdown table cell.
func mdEscape(s string) string {
	return strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;").Replace(s)
}

// valueName names a value type for the reference.
func valueName(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "duration (`250ms`, `15s`)"
	case reflect.TypeFor[Rate]():
		return "rate (`2800/s`, `90/m`)"
	case reflect.TypeFor[ByteSize]():
		return "byte size (`512`, `64KiB`)"
	case reflect.TypeFor[Percentile]():
		return "percentile (`p99`, `p99.9`)"
	case reflect.TypeFor[CPUQuantity]():
		return "CPU quantity (`500m`, `1.5`)"
	case reflect.TypeFor[IntOrPercent]():
		return "count or percentage (`1`, `25%`)"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return valueName(t.Elem())
	case reflect.Struct:
		return "[" + t.Name() + "](#" + strings.ToLower(t.Name()) + ")"
	case reflect.Slice:
		return "list of " + valueName(t.Elem())
	case reflect.Map:
		return "map of " + valueName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Interface:
		return "integer or string"
	}
	return t.String()
}
