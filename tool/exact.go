package tool

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/toolgate/toolgate/internal/sorted"
)

// DecodeExact is DecodeStrict, and also refuses a key that names one of v's
// fields in another case. encoding/json matches keys case-insensitively, so
// DecodeStrict alone lets "CALL_ID" fill call_id — and with "call_id" and
// "CALL_ID" both given, the last one wins while a case-sensitive reader of
// the same bytes sees the first. Every key of an object decoded into a
// struct, at any depth, must be spelt exactly as the field's JSON name. The
// error names the key and the field it was taken for.
func DecodeExact(raw []byte, v any) error {
	if err := DecodeStrict(raw, v); err != nil {
		return err
	}
	return exactKeys(raw, reflect.TypeOf(v), "")
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// exactKeys checks raw (already decoded strictly into a t) against t's JSON
// field names; at is where raw is, for the error.
func exactKeys(raw []byte, t reflect.Type, at string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil // it decodes itself (json.RawMessage, time.Time …)
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil || members == nil {
			return nil // null, or not an object: DecodeStrict has judged it
		}
		fields := jsonFields(t)
		for _, key := range sorted.Keys(members) { // sorted: workflows call this, and the error must not depend on map order
			val := members[key]
			ft, ok := fields[key]
			if !ok {
				for _, name := range sorted.Keys(fields) {
					if strings.EqualFold(name, key) {
						return fmt.Errorf("key %q%s: the field is %q (keys are matched exactly, case included)", key, where(at), name)
					}
				}
				return fmt.Errorf("key %q%s: not a field (keys are matched exactly, case included)", key, where(at))
			}
			if err := exactKeys(val, ft, at+"."+key); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil
		}
		for i, it := range items {
			if err := exactKeys(it, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil
		}
		for _, key := range sorted.Keys(members) {
			if err := exactKeys(members[key], t.Elem(), at+"."+key); err != nil {
				return err
			}
		}
	}
	return nil
}

func where(at string) string {
	if at == "" {
		return ""
	}
	return " (at " + strings.TrimPrefix(at, ".") + ")"
}

// jsonFields are the JSON names of t's fields as encoding/json decodes them
// (embedded structs without a name of their own promote theirs), with the
// type each decodes into.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				promoted := jsonFields(et)
				for _, n := range sorted.Keys(promoted) {
					if _, shadowed := out[n]; !shadowed {
						out[n] = promoted[n]
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}
