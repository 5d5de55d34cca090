package load

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The json checks read one field of a response body. Decoding the whole
// body into maps (encoding/json) costs an allocation per key and value,
// for every response a check applies to; this scanner instead checks that
// the body is one JSON document (RFC 8259's grammar, as encoding/json
// accepts it) and finds a field's bytes in place, allocating only to
// unescape a key or a string that holds escapes.

// maxJSONDepth bounds nesting, as encoding/json does.
const maxJSONDepth = 10000

// jsonValid checks that d is exactly one JSON document (surrounding
// white space allowed). The error text says what is wrong and where.
func jsonValid(d []byte) error {
	i := skipWS(d, 0)
	if i == len(d) {
		return fmt.Errorf("empty body")
	}
	end, err := scanValue(d, i, 0)
	if err != nil {
		return err
	}
	if skipWS(d, end) != len(d) {
		return fmt.Errorf("data after the document")
	}
	return nil
}

func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// badChar is the error for the byte at i (or the end of d).
func badChar(d []byte, i int) error {
	if i >= len(d) {
		return fmt.Errorf("unexpected end of body")
	}
	return fmt.Errorf("invalid character %q at byte %d", rune(d[i]), i)
}

// scanValue scans the value starting at d[i] (no white space before it)
// and returns the index just after it.
func scanValue(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return i, badChar(d, i)
	}
	switch c := d[i]; {
	case c == '{':
		return scanObject(d, i, depth+1)
	case c == '[':
		return scanArray(d, i, depth+1)
	case c == '"':
		end, _, err := scanString(d, i)
		return end, err
	case c == 't':
		return scanLiteral(d, i, "true")
	case c == 'f':
		return scanLiteral(d, i, "false")
	case c == 'n':
		return scanLiteral(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(d, i)
	}
	return i, badChar(d, i)
}

func scanObject(d []byte, i, depth int) (int, error) {
	if depth > maxJSONDepth {
		return i, fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, badChar(d, i)
		}
		end, _, err := scanString(d, i)
		if err != nil {
			return end, err
		}
		i = skipWS(d, end)
		if i >= len(d) || d[i] != ':' {
			return i, badChar(d, i)
		}
		if i, err = scanValue(d, skipWS(d, i+1), depth); err != nil {
			return i, err
		}
		i = skipWS(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipWS(d, i+1)
			continue
		}
		if i < len(d) && d[i] == '}' {
			return i + 1, nil
		}
		return i, badChar(d, i)
	}
}

func scanArray(d []byte, i, depth int) (int, error) {
	if depth > maxJSONDepth {
		return i, fmt.Errorf("nested more than %d deep", maxJSONDepth)
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(d, i, depth); err != nil {
			return i, err
		}
		i = skipWS(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipWS(d, i+1)
			continue
		}
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		return i, badChar(d, i)
	}
}

// scanString scans the string whose opening quote is d[i]; escaped says
// it holds escapes (its text is then not its bytes).
func scanString(d []byte, i int) (end int, escaped bool, err error) {
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c < 0x20:
			return i, escaped, badChar(d, i)
		case c == '\\':
			escaped = true
			i++
			if i >= len(d) {
				return i, escaped, badChar(d, i)
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(d) || !isHex(d[i+k]) {
						return i + k, escaped, badChar(d, i+k)
					}
				}
				i += 4
			default:
				return i, escaped, badChar(d, i)
			}
		}
	}
	return i, escaped, badChar(d, i)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func scanLiteral(d []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(d) || d[i+k] != lit[k] {
			return i + k, badChar(d, i+k)
		}
	}
	return i + len(lit), nil
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(d []byte, i int) (int, error) {
	digits := func(i int) (int, bool) {
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i, _ = digits(i)
	default:
		return i, badChar(d, i)
	}
	if i < len(d) && d[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, badChar(d, i)
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, badChar(d, i)
		}
	}
	return i, nil
}

// jsonLookup finds the value at path (object keys, outermost first) in
// d, a document jsonValid accepted, and returns its bytes; found is false
// when a key is missing or a step meets something other than an object.
// A key given twice counts by its last value, as with encoding/json.
func jsonLookup(d []byte, path []string) (v []byte, found bool) {
	i := skipWS(d, 0)
	for _, key := range path {
		if i >= len(d) || d[i] != '{' {
			return nil, false
		}
		at := -1
		i = skipWS(d, i+1)
		for i < len(d) && d[i] == '"' {
			kend, esc, _ := scanString(d, i)
			match := stringIs(d[i:kend], esc, key)
			i = skipWS(d, kend) + 1 // past ':'
			i = skipWS(d, i)
			if match {
				at = i
			}
			i, _ = scanValue(d, i, 0)
			i = skipWS(d, i)
			if i < len(d) && d[i] == ',' {
				i = skipWS(d, i+1)
				continue
			}
			break
		}
		if at < 0 {
			return nil, false
		}
		i = at
	}
	end, _ := scanValue(d, i, 0)
	return d[i:end], true
}

// stringIs reports whether the JSON string q (quotes included) reads s.
func stringIs(q []byte, escaped bool, s string) bool {
	if raw := q[1 : len(q)-1]; !escaped && utf8.Valid(raw) {
		return string(raw) == s
	}
	return jsonString(q) == s
}

// jsonString is the text of the JSON string q (quotes included), escapes
// resolved and invalid UTF-8 replaced (U+FFFD) as encoding/json does.
func jsonString(q []byte) string {
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}
