package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/tool"
)

// validator checks a proposed call before it reaches the gate: the tool must
// be registered and the arguments must be a JSON object that its schema
// accepts. Schemas are the worker's declared specs (recorded in history),
// compiled with tool.CompileSchema, which reads nothing but the schema's own
// bytes; validating does no I/O and its text is sorted, so the check is
// deterministic.
type validator struct {
	specs    map[string]tool.Spec
	compiled map[string]*tool.Schema
}

func newValidator(specs map[string]tool.Spec) *validator {
	return &validator{specs: specs, compiled: map[string]*tool.Schema{}}
}

// check looks the call's tool up and validates its arguments. On success the
// call's arguments are replaced by their canonical form, so the trace, the
// interrupt, the memo key and the activity all see one exact form.
func (r *run) check(c *tool.Call) (tool.Spec, error) {
	spec, ok := r.specs[c.Tool]
	if !ok {
		return spec, fmt.Errorf("%s: no tool named %q is registered (tools: %s)", tool.TypeUnknownTool, c.Tool, strings.Join(r.toolNames(), ", "))
	}
	args := bytes.TrimSpace(c.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	canon, err := tool.Canonical(args)
	if err != nil {
		return spec, fmt.Errorf("%s: %s: arguments are not valid JSON: %v", tool.TypeInvalidArgs, c.Tool, err)
	}
	if canon[0] != '{' {
		// A planner hands over arguments a model wrote as broken JSON as a JSON
		// string holding that text: say what is wrong with the text.
		var text string
		if json.Unmarshal(canon, &text) == nil && !json.Valid([]byte(text)) {
			return spec, fmt.Errorf("%s: %s: arguments are not valid JSON: %s", tool.TypeInvalidArgs, c.Tool, clip(text, 200))
		}
		return spec, fmt.Errorf("%s: %s: arguments must be a JSON object, got %s", tool.TypeInvalidArgs, c.Tool, clip(string(canon), 80))
	}
	c.Args = canon
	if len(canon) > MaxArgsBytes {
		return spec, fmt.Errorf("%s: %s: arguments are %d bytes: at most %d", tool.TypeInvalidArgs, c.Tool, len(canon), MaxArgsBytes)
	}
	if err := r.tools.validate(spec, canon); err != nil {
		return spec, fmt.Errorf("%s: %s: %v", tool.TypeInvalidArgs, c.Tool, err)
	}
	return spec, nil
}

func (v *validator) validate(spec tool.Spec, args []byte) error {
	if len(spec.Schema) == 0 {
		return nil
	}
	sch, ok := v.compiled[spec.Name]
	if !ok {
		var err error
		if sch, err = tool.CompileSchema(spec.Schema); err != nil {
			return fmt.Errorf("the tool's %w", err)
		}
		v.compiled[spec.Name] = sch
	}
	return sch.Validate(args)
}

func (r *run) toolNames() []string {
	names := make([]string, 0, len(r.Config.Tools))
	for _, s := range r.Config.Tools {
		names = append(names, s.Name)
	}
	return names
}
