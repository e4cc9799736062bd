package workflows

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

	"github.com/toolgate/toolgate/tool"
)

// validator checks a proposed call before it reaches the gate: the tool must
// be registered and the arguments must be a JSON object that its schema
// accepts. Schemas are the worker's declared specs (recorded in history), and
// compiling or applying them does no I/O, so the check is deterministic.
type validator struct {
	specs    map[string]tool.Spec
	compiled map[string]*jsonschema.Schema
	printer  *message.Printer
}

func newValidator(specs map[string]tool.Spec) *validator {
	return &validator{specs: specs, compiled: map[string]*jsonschema.Schema{}, printer: message.NewPrinter(language.English)}
}

// check looks the call's tool up and validates its arguments. On success the
// call's arguments are replaced by their canonical form, so the trace, the
// interrupt, the memo key and the activity all see one exact form.
func (r *run) check(c *tool.Call) (tool.Spec, error) {
	spec, ok := r.specs[c.Tool]
	if !ok {
		return spec, fmt.Errorf("%s: no tool named %q is registered (tools: %s)", tool.ErrUnknownTool, c.Tool, strings.Join(r.toolNames(), ", "))
	}
	args := bytes.TrimSpace(c.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	canon, err := tool.Canonical(args)
	if err != nil {
		return spec, fmt.Errorf("%s: %s: arguments are not valid JSON: %v", tool.ErrInvalidArgs, c.Tool, err)
	}
	if canon[0] != '{' {
		// A planner hands over arguments a model wrote as broken JSON as a JSON
		// string holding that text: say what is wrong with the text.
		var text string
		if json.Unmarshal(canon, &text) == nil && !json.Valid([]byte(text)) {
			return spec, fmt.Errorf("%s: %s: arguments are not valid JSON: %s", tool.ErrInvalidArgs, c.Tool, truncate([]byte(text), 200))
		}
		return spec, fmt.Errorf("%s: %s: arguments must be a JSON object, got %s", tool.ErrInvalidArgs, c.Tool, truncate(canon, 80))
	}
	c.Args = canon
	if len(canon) > MaxArgsBytes && r.version >= versionTrust {
		return spec, fmt.Errorf("%s: %s: arguments are %d bytes: at most %d", tool.ErrInvalidArgs, c.Tool, len(canon), MaxArgsBytes)
	}
	if err := r.tools.validate(spec, canon); err != nil {
		return spec, fmt.Errorf("%s: %s: %v", tool.ErrInvalidArgs, c.Tool, err)
	}
	return spec, nil
}

func (v *validator) validate(spec tool.Spec, args []byte) error {
	if len(spec.Schema) == 0 {
		return nil
	}
	sch, ok := v.compiled[spec.Name]
	if !ok {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Schema))
		if err != nil {
			return fmt.Errorf("the tool's schema is not JSON: %w", err)
		}
		c := jsonschema.NewCompiler()
		url := "toolgate:///" + spec.Name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return fmt.Errorf("the tool's schema: %w", err)
		}
		if sch, err = c.Compile(url); err != nil {
			return fmt.Errorf("the tool's schema does not compile: %w", err)
		}
		v.compiled[spec.Name] = sch
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return err
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return errors.New(v.describe(ve))
	}
	return err
}

// describe lists a validation error's leaf causes, sorted, so the text is the
// same on every replay whatever order the validator visited properties in.
func (v *validator) describe(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, fmt.Sprintf("at /%s: %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(v.printer)))
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

func (r *run) toolNames() []string {
	names := make([]string, 0, len(r.cfg.Tools))
	for _, s := range r.cfg.Tools {
		names = append(names, s.Name)
	}
	return names
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
