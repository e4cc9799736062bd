package tool

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// Refine adjusts a schema derived from a tool's argument type with what the
// Go type cannot say: bounds, lengths, enums, defaults. It edits the derived
// schema in place, e.g.
//
//	func(s *jsonschema.Schema) { s.Properties["limit"].Minimum = jsonschema.Ptr(1.0) }
//
// A Refine that panics (say, on a property the type does not have) makes
// the derivation fail with that message: the worker refuses the tool.
type Refine func(s *jsonschema.Schema)

// deriveOptions: json.RawMessage holds any JSON value, not an array of bytes.
var deriveOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}}

// SchemaFor derives the JSON Schema of arguments decoded into A, with the
// package the official MCP Go SDK uses (github.com/google/jsonschema-go), then
// applies refine in order. For a struct (or pointer to one): an object whose
// properties are the fields by their json names, required unless tagged
// omitempty or omitzero, no other properties, and each property's
// description from its `jsonschema:"..."` tag. For a map with string keys: an
// object whose values follow the element type. For any other A (any,
// json.RawMessage …) SchemaFor returns no schema: the arguments are not
// checked against one.
func SchemaFor[A any](refine ...Refine) (json.RawMessage, error) {
	t := reflect.TypeFor[A]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
		if len(refine) > 0 {
			return nil, fmt.Errorf("deriving the argument schema: %s is not a struct or map, so there is no schema to refine", t)
		}
		return nil, nil
	}
	s, err := jsonschema.ForType(t, deriveOptions)
	if err != nil {
		return nil, fmt.Errorf("deriving the argument schema from %s: %w", t, err)
	}
	for _, r := range refine {
		if err := apply(r, s); err != nil {
			return nil, fmt.Errorf("refining the argument schema derived from %s: %w", t, err)
		}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the argument schema derived from %s: %w", t, err)
	}
	return raw, nil
}

func apply(r Refine, s *jsonschema.Schema) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r(s)
	return nil
}
