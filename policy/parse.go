package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// MaxFileSize is the largest policy file Load and Parse accept.
const MaxFileSize = 1 << 20

// Parse reads a policy written in YAML (or JSON, which is YAML) strictly:
// unknown keys, duplicate keys, and a document that is not exactly one
// mapping are refused. The policy is then checked with Validate. Errors name
// the place: a line for a syntax or type error, a path such as
// `tools.refund.rules[1].when` for a validation error.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("policy: %d bytes, at most %d", len(data), MaxFileSize)
	}
	if err := checkShape(data); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkShape refuses anything but a single YAML document holding a mapping.
func checkShape(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty document, want a mapping with approvers and tools")
		}
		return err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the document is not a mapping, want one with approvers and tools", doc.Line)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("line %d: a second document; a policy is one document", next.Line)
	}
}

// Load reads and parses the policy file at path (at most MaxFileSize bytes).
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("policy file %s: larger than %d bytes", path, MaxFileSize)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return p, nil
}
