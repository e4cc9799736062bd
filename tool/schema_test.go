package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A schema may refer only to its own document: compiling never reads a file
// or the network, whatever the $ref says. The file exists and is a valid
// schema, so a compiler with a file loader would accept the first case.
func TestCompileSchemaRefusesRefsOutsideTheDocument(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"type":"object"}`), 0o600))

	for name, ref := range map[string]string{
		"file":     "file://" + filepath.ToSlash(other),
		"http":     "http://127.0.0.1:1/schema.json",
		"https":    "https://example.com/schema.json",
		"relative": "other.json",
		"urn":      "urn:example:schema",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"` + ref + `"}}}`))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "nothing is loaded from disk or network")
		})
	}
	t.Run("$schema", func(t *testing.T) {
		_, err := CompileSchema(json.RawMessage(`{"$schema":"https://example.com/my-meta.json","type":"object"}`))
		require.Error(t, err)
	})

	// Inside the document, and the built-in meta-schemas, are fine.
	s, err := CompileSchema(json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"properties": {"id": {"$ref": "#/$defs/id"}},
		"$defs": {"id": {"type": "string", "minLength": 1}}
	}`))
	require.NoError(t, err)
	require.NoError(t, s.Validate([]byte(`{"id":"TKT-3"}`)))
	require.EqualError(t, s.Validate([]byte(`{"id":""}`)), "arguments do not match the schema: at /id: minLength: got 0, want 1")

	_, err = CompileSchema(json.RawMessage(`{"type":`))
	require.ErrorContains(t, err, "schema is not JSON")
}

// The workflow validates during replay: the text must not depend on the
// order the validator visits properties in (a map, so random per run).
func TestValidateTextIsTheSameWhateverMapOrder(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"},
			"d": {"type": "string", "maxLength": 1}, "e": {"type": "integer", "minimum": 5},
			"f": {"enum": ["x", "y"]}, "g": {"type": "array"}, "h": {"type": "object"}
		},
		"required": ["a", "z"],
		"additionalProperties": false
	}`))
	require.NoError(t, err)
	args := []byte(`{"a":1,"b":"two","c":"no","d":"long","e":1,"f":"w","g":{},"h":[],"q":true}`)
	want := s.Validate(args)
	require.Error(t, want)
	for range 50 {
		got := s.Validate(args)
		require.Error(t, got)
		require.Equal(t, want.Error(), got.Error())
	}
	msg := want.Error()
	require.True(t, strings.HasPrefix(msg, "arguments do not match the schema: at /: "), msg)
	leaves := strings.Split(strings.TrimPrefix(msg, "arguments do not match the schema: "), "; ")
	assert.IsIncreasing(t, leaves, "leaf causes sorted")
	for _, p := range []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"} {
		assert.Contains(t, msg, "at "+p+": ")
	}
}

type searchArgs struct {
	Query string          `json:"query" jsonschema:"Text to look for."`
	Limit int             `json:"limit,omitempty" jsonschema:"Most results to return."`
	Tags  []string        `json:"tags,omitzero"`
	Extra json.RawMessage `json:"extra,omitempty"`
	Skip  string          `json:"-"`
}

func search(context.Context, searchArgs) (string, error) { return "", nil }

func TestNewDerivesTheSchemaFromTheArgumentType(t *testing.T) {
	tl := New(Spec{Name: "search"}, search)
	require.NoError(t, tl.Validate())
	assert.JSONEq(t, `{
		"type": "object",
		"properties": {
			"query": {"type": "string", "description": "Text to look for."},
			"limit": {"type": "integer", "description": "Most results to return."},
			"tags": {"type": ["null", "array"], "items": {"type": "string"}},
			"extra": true
		},
		"required": ["query"],
		"additionalProperties": false
	}`, string(tl.Spec.Schema))

	s, err := CompileSchema(tl.Spec.Schema)
	require.NoError(t, err)
	require.NoError(t, s.Validate([]byte(`{"query":"login","extra":{"any":["json"]}}`)))
	require.EqualError(t, s.Validate([]byte(`{"limit":2,"qurey":"login"}`)),
		"arguments do not match the schema: at /: additional properties 'qurey' not allowed; at /: missing property 'query'")

	// Refine says what the type cannot.
	tl = New(Spec{Name: "search"}, search, func(s *jsonschema.Schema) {
		s.Properties["limit"].Minimum = jsonschema.Ptr(1.0)
		s.Properties["query"].MinLength = jsonschema.Ptr(1)
	})
	require.NoError(t, tl.Validate())
	s, err = CompileSchema(tl.Spec.Schema)
	require.NoError(t, err)
	require.EqualError(t, s.Validate([]byte(`{"query":"","limit":0}`)),
		"arguments do not match the schema: at /limit: minimum: got 0, want 1; at /query: minLength: got 0, want 1")

	// An explicit schema overrides the derived one.
	explicit := json.RawMessage(`{"type":"object"}`)
	tl = New(Spec{Name: "search", Schema: explicit}, search)
	assert.Equal(t, explicit, tl.Spec.Schema)

	// Arguments of no particular shape get no schema.
	tl = New(Spec{Name: "echo"}, func(context.Context, json.RawMessage) (string, error) { return "", nil })
	assert.Empty(t, tl.Spec.Schema)
	require.NoError(t, tl.Validate())
}

func TestToolValidateReportsSchemaProblemsByName(t *testing.T) {
	tl := New(Spec{Name: "search"}, search, func(s *jsonschema.Schema) { s.Properties["lmit"].Minimum = jsonschema.Ptr(1.0) })
	require.ErrorContains(t, tl.Validate(), "tool search: refining the argument schema")

	type bad struct {
		C chan int `json:"c"`
	}
	tl = New(Spec{Name: "piped"}, func(context.Context, bad) (string, error) { return "", nil })
	require.ErrorContains(t, tl.Validate(), "tool piped: deriving the argument schema")

	tl = New(Spec{Name: "remote", Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}, search)
	err := tl.Validate()
	require.ErrorContains(t, err, "tool remote: schema does not compile")
	require.ErrorContains(t, err, "https://example.com/s.json")
}
