package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a tool's compiled argument schema: the one validator the worker
// (at registration), the workflow (before the gate) and the planners use.
//
// Compiling reads nothing but the schema's own bytes: a $ref to anything
// outside the document (file:, http:, https:, another URN) is a compile
// error, never a read from disk or network. Validating is pure computation
// and its error text is deterministic (the same on every replay).
type Schema struct {
	compiled *jsonschema.Schema
}

// schemaLocation is the URL the document is compiled under. It names no
// real resource: no loader could fetch it, and none is asked to.
const schemaLocation = "toolgate:///arguments.json"

// noLoader is the loader the compiler gets: every URL it would have to fetch
// is refused. Only the document itself (added as a resource) and the JSON
// Schema meta-schemas built into the library are ever resolved.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %s: a schema may refer only to its own document; nothing is loaded from disk or network", url)
}

// CompileSchema compiles a tool's JSON Schema. It refuses bytes that are not
// JSON, schemas that do not compile, and any $ref (or $schema) that points
// outside the document.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaLocation, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(schemaLocation)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	return &Schema{compiled: s}, nil
}

// english prints a validation error's leaf messages. message.Printer keeps no
// state between calls, so one printer is shared.
var english = message.NewPrinter(language.English)

// Validate checks args (JSON) against the schema. A mismatch is reported as
// "arguments do not match the schema: " followed by every leaf cause, each as
// "at /pointer: message", sorted and deduplicated: the text does not depend
// on the order the validator visited properties in (nor on map order).
func (s *Schema) Validate(args []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	err = s.compiled.Validate(inst)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return errors.New(describe(ve))
	}
	return err
}

// describe lists a validation error's leaf causes, sorted.
func describe(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, fmt.Sprintf("at /%s: %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(leaves)
	return "arguments do not match the schema: " + strings.Join(slices.Compact(leaves), "; ")
}
