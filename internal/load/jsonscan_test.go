package load

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var jsonCorpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `true`, `false`, `null`, ` {"a" : 1 } `,
	`{"a":{"b":[1,2,{"c":"d"}],"e":null},"f":"g\"h"}`,
	`{"code":"ERR_TAX_BULKHEAD_SATURATED","fallback":{"tax_cents":12}}`,
	`{"k\u0065y":"v\n\u00e9"}`, `{"a":1,"a":2}`, `{"a":"\/"}`,
	`{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`,
	`+1`, `tru`, `nul`, `"abc`, `"a\x"`, `"\u12"`, "\"a\tb\"", `{"a":1} x`, `{} {}`, ``, `   `,
	`<html>`, `NaN`, `{"a":[[[[]]]]}`, `"\ud800"`, "\"\xff\"",
}

// TestJSONScanAgreesWithEncodingJSON: the scanner accepts exactly the
// documents encoding/json accepts, and finds the values it would decode.
func TestJSONScanAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range jsonCorpus {
		checkAgainstEncodingJSON(t, []byte(doc))
	}
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	if jsonValid([]byte(deep)) == nil {
		t.Error("a document nested beyond maxJSONDepth passed")
	}
}

func FuzzJSONScan(f *testing.F) {
	for _, doc := range jsonCorpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkAgainstEncodingJSON(t, doc) })
}

func checkAgainstEncodingJSON(t *testing.T, doc []byte) {
	t.Helper()
	var v any
	want := json.Unmarshal(doc, &v) == nil
	if got := jsonValid(doc) == nil; got != want {
		t.Fatalf("jsonValid(%q) = %v, encoding/json says %v", doc, got, want)
	}
	if !want {
		return
	}
	// Every key path of the document finds what encoding/json decoded.
	var walk func(path []string, x any)
	walk = func(path []string, x any) {
		raw, ok := jsonLookup(doc, path)
		if !ok {
			t.Fatalf("jsonLookup(%q, %q) found nothing", doc, path)
		}
		var y any
		if err := json.Unmarshal(raw, &y); err != nil {
			t.Fatalf("jsonLookup(%q, %q) = %q: %v", doc, path, raw, err)
		}
		a, _ := json.Marshal(x)
		b, _ := json.Marshal(y)
		if !bytes.Equal(a, b) {
			t.Fatalf("jsonLookup(%q, %q) = %s, encoding/json has %s", doc, path, b, a)
		}
		if m, ok := x.(map[string]any); ok {
			for k, e := range m {
				walk(append(path[:len(path):len(path)], k), e)
			}
		}
	}
	walk(nil, v)
	if _, ok := jsonLookup(doc, []string{"no such key \x00"}); ok {
		t.Fatalf("jsonLookup(%q) found a key that is not there", doc)
	}
}
