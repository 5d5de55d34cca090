package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds how many YAML nodes one decode visits, so aliases that
// expand exponentially ("billion laughs") fail cleanly.
const maxNodes = 50_000

// maxDepth bounds nesting, including alias cycles.
const maxDepth = 64

// Parse decodes one scenario from data; file names it in errors and is
// stored in [Scenario.File]. It checks apiVersion and kind first, then
// decodes strictly: unknown or duplicate keys, missing required keys, wrong
// types and values without units are errors. It fills [Scenario.Positions].
// It does not apply defaults, read manifests or run semantic checks (see
// [Load]). Errors are *[Errors].
func Parse(file string, data []byte) (*Scenario, error) {
	d := &decoder{file: file, pos: map[string]Position{}}
	root := d.parseYAML(data)
	if root == nil {
		return nil, d.errs.err(file)
	}
	if !d.checkTypeMeta(root) {
		return nil, d.errs.err(file)
	}
	manual := takeManual(root)
	s := &Scenario{}
	d.decode(root, reflect.ValueOf(s).Elem(), "", 0)
	if err := d.errs.err(file); err != nil {
		return nil, err
	}
	manual.apply(s)
	s.File = file
	s.Positions = d.pos
	return s, nil
}

// decoder is a strict YAML-node-to-struct decoder that keeps positions and
// collects every error.
type decoder struct {
	file  string
	errs  errorList
	pos   map[string]Position
	nodes int
}

func (d *decoder) errorAt(n *yaml.Node, path, format string, args ...any) {
	e := &Error{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs.add(e)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML checks that data is one YAML text document and returns its root
// node, or nil after recording errors.
func (d *decoder) parseYAML(data []byte) *yaml.Node {
	if line, col, msg, bad := binaryProblem(data); bad {
		d.errs.add(&Error{File: d.file, Line: line, Column: col, Msg: msg})
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		d.errs.add(&Error{File: d.file, Line: 1, Column: 1, Msg: "empty scenario: expected apiVersion: " + APIVersion + " and kind: " + KindScenario})
		return nil
	}
	if err != nil {
		d.syntaxError(data, err)
		return nil
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(data, err)
			return nil
		}
		d.errs.add(&Error{File: d.file, Line: max(next.Line, 1), Column: max(next.Column, 1),
			Msg: "a second YAML document; a scenario file holds exactly one (remove the extra ---)"})
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		d.errs.add(&Error{File: d.file, Line: 1, Column: 1, Msg: "empty scenario: expected apiVersion: " + APIVersion + " and kind: " + KindScenario})
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		d.errs.add(&Error{File: d.file, Line: 1, Column: 1, Msg: "empty scenario: expected apiVersion: " + APIVersion + " and kind: " + KindScenario})
		return nil
	}
	return root
}

// syntaxError records a YAML syntax error; tabs used for indentation are
// named precisely since they are the usual cause.
func (d *decoder) syntaxError(data []byte, err error) {
	if tabs := indentTabs(data); len(tabs) > 0 {
		for _, p := range tabs {
			d.errs.add(&Error{File: d.file, Line: p.Line, Column: p.Column,
				Msg: "tab character in indentation; YAML indents with spaces only"})
		}
		return
	}
	line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	d.errs.add(&Error{File: d.file, Line: line, Column: 1, Msg: "invalid YAML: " + msg})
}

// indentTabs returns the position of each tab in a line's leading
// whitespace (at most 20).
func indentTabs(data []byte) []Position {
	var out []Position
	for i, line := range bytes.Split(data, []byte("\n")) {
		for j, c := range line {
			if c == '\t' {
				out = append(out, Position{Line: i + 1, Column: j + 1})
				break
			}
			if c != ' ' {
				break
			}
		}
		if len(out) == 20 {
			break
		}
	}
	return out
}

// binaryProblem finds the first byte that cannot be in a YAML text file:
// invalid UTF-8, NUL or another control character (tab, LF and CR are fine).
func binaryProblem(data []byte) (line, col int, msg string, bad bool) {
	line, col = 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, col, fmt.Sprintf("not a YAML text file: invalid UTF-8 byte 0x%02x (a scenario is UTF-8 text)", data[i]), true
		case r == '\n':
			line++
			col = 0
		case r == '\t' || r == '\r' || r == 0xFEFF:
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return line, col, fmt.Sprintf("not a YAML text file (binary data?): control character U+%04X", r), true
		}
		i += size
		col++
	}
	return 0, 0, "", false
}

// typeMeta phase: apiVersion and kind are read and checked before anything
// else, so a file of another format or version gets one clear error.
func (d *decoder) checkTypeMeta(root *yaml.Node) bool {
	if root.Kind != yaml.MappingNode {
		d.errorAt(root, "", "expected a mapping with apiVersion: %s and kind: %s, got %s", APIVersion, KindScenario, describe(root))
		return false
	}
	ok := true
	check := func(key, want string) {
		var val *yaml.Node
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				val = root.Content[i+1]
			}
		}
		switch {
		case val == nil:
			d.errorAt(root, "", "missing %s; this file must start with apiVersion: %s and kind: %s", key, APIVersion, KindScenario)
			ok = false
		case val.Kind != yaml.ScalarNode || val.Value != want:
			d.errorAt(val, key, "unknown %s %q; known: %s", key, val.Value, want)
			ok = false
		}
	}
	check("apiVersion", APIVersion)
	check("kind", KindScenario)
	return ok
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// decode decodes n into v (addressable), recording errors and positions.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, depth int) {
	d.nodes++
	if d.nodes == maxNodes {
		d.errorAt(n, path, "document too large or aliases expand too much (more than %d nodes)", maxNodes)
	}
	if d.nodes >= maxNodes {
		return
	}
	if depth > maxDepth {
		d.errorAt(n, path, "nested too deeply (alias cycle?)")
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.errorAt(n, path, "unknown alias")
			return
		}
		d.decode(n.Alias, v, path, depth+1)
		return
	}
	if path != "" {
		if _, ok := d.pos[path]; !ok {
			d.pos[path] = Position{Line: n.Line, Column: n.Column}
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // unset: the default applies
	}
	if v.Kind() != reflect.Pointer && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.errorAt(n, path, "%s", err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		before := len(d.errs.list)
		d.decode(n, nv.Elem(), path, depth+1)
		if len(d.errs.list) == before {
			v.Set(nv)
		}
	case reflect.Struct:
		d.decodeStruct(n, v, path, depth)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorAt(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path, depth)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorAt(n, path, "expected a text value, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int32, reflect.Int64:
		var x int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&x) != nil {
			d.errorAt(n, path, "expected a whole number, got %s", describe(n))
			return
		}
		if v.OverflowInt(x) {
			d.errorAt(n, path, "number %s is out of range", n.Value)
			return
		}
		v.SetInt(x)
	case reflect.Float64:
		var x float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&x) != nil {
			d.errorAt(n, path, "expected a number, got %s", describe(n))
			return
		}
		v.SetFloat(x)
	case reflect.Bool:
		var x bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&x) != nil {
			d.errorAt(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(x)
	case reflect.Interface:
		// A port: a number or a name.
		if n.Kind != yaml.ScalarNode {
			d.errorAt(n, path, "expected a port number or name, got %s", describe(n))
			return
		}
		var x int64
		if n.ShortTag() == "!!int" && n.Decode(&x) == nil {
			v.Set(reflect.ValueOf(int(x)))
			return
		}
		v.Set(reflect.ValueOf(n.Value))
	default:
		d.errorAt(n, path, "cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.errorAt(n, path, "expected a mapping (key: value lines), got %s", describe(n))
		return
	}
	si := infoFor(v.Type())
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorAt(k, path, "expected a key, got %s", describe(k))
			continue
		}
		kp := joinPath(path, k.Value)
		if k.Value == "<<" {
			d.errorAt(k, path, "merge keys (<<) are not supported; repeat the keys or use an alias for the whole value")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorAt(k, kp, "duplicate key %q (first at line %d)", k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		idx, ok := si.byName[k.Value]
		if !ok {
			d.errorAt(k, kp, "unknown key %q%s", k.Value, keyHint(k.Value, si.names))
			continue
		}
		f := si.fields[idx]
		d.decode(val, v.Field(f.index), kp, depth+1)
	}
	for _, f := range si.fields {
		if f.required && seen[f.name] == nil {
			d.errorAt(n, path, "missing required key %q", f.name)
		}
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.errorAt(n, path, "expected a mapping (key: value lines), got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			d.errorAt(k, path, "expected a key, got %s", describe(k))
			continue
		}
		kp := mapKeyPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.errorAt(k, kp, "duplicate key %q (first at line %d)", k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, ev, kp, depth+1)
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
}
