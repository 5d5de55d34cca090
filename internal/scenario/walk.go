package scenario

import (
	"fmt"
	"reflect"
	"sort"
)

// walkStrings calls fn for every string reachable from v (struct fields by
// YAML key, slices, string maps), with its field path.
func walkStrings(v reflect.Value, path string, fn func(path, s string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, fn)
		}
	case reflect.Struct:
		si := infoFor(v.Type())
		for _, f := range si.fields {
			walkStrings(v.Field(f.index), joinPath(path, f.name), fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			walkStrings(v.MapIndex(k), mapKeyPath(path, k.String()), fn)
		}
	case reflect.String:
		fn(path, v.String())
	}
}
