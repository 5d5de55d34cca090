package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// fieldInfo describes one YAML key of a struct.
type fieldInfo struct {
	name     string
	index    int
	required bool
}

// structInfo describes the YAML keys of a struct type.
type structInfo struct {
	fields []fieldInfo
	byName map[string]int
	names  []string // sorted
}

var structCache sync.Map // reflect.Type -> *structInfo

// optionalKeys are keys without omitempty that may still be left out
// (their zero value means "default").
var optionalKeys = map[string]bool{
	"Scenario.environment": true,
}

func infoFor(t reflect.Type) *structInfo {
	if v, ok := structCache.Load(t); ok {
		return v.(*structInfo)
	}
	si := &structInfo{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		req := !strings.Contains(opts, "omitempty") && !optionalKeys[t.Name()+"."+name]
		si.byName[name] = len(si.fields)
		si.fields = append(si.fields, fieldInfo{name: name, index: i, required: req})
		si.names = append(si.names, name)
	}
	sort.Strings(si.names)
	structCache.Store(t, si)
	return si
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func mapKeyPath(parent, key string) string {
	if plainKeyRE.MatchString(key) {
		return joinPath(parent, key)
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// UnknownKey reports whether key is not a YAML key of v's struct type
// (e.g. Assertion{}), with the message the decoder gives for it, such as
// `unknown key "maxLatncy"; did you mean "maxLatency"?`. v must be a
// struct or a pointer to one.
func UnknownKey(v any, key string) (msg string, unknown bool) {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	si := infoFor(t)
	if _, ok := si.byName[key]; ok {
		return "", false
	}
	return fmt.Sprintf("unknown key %q%s", key, keyHint(key, si.names)), true
}

// keyHint suggests the closest known key, or lists them all.
func keyHint(got string, known []string) string {
	if s := closest(got, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return "; known: " + strings.Join(known, ", ")
}

// closest returns the candidate nearest to s by edit distance (ignoring
// case), if it is near enough to be a likely typo.
func closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(2, len(s)/3)
	if bestD <= limit && bestD < len(s) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b (in bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
