package worker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
)

func noop(spec tool.Spec) tool.Tool {
	return tool.New(spec, func(context.Context, struct{}) (string, error) { return "", nil })
}

func TestValidateRefusesBadDeclarations(t *testing.T) {
	err := Options{Tools: []tool.Tool{
		noop(tool.Spec{Name: "read", Fallback: "missing"}),
		noop(tool.Spec{Name: "read"}),
		noop(tool.Spec{Name: "write", Destructive: true, Invalidates: []string{"nowhere"}}),
		noop(tool.Spec{Name: "9lives"}),
		{Spec: tool.Spec{Name: "hollow"}},
	}, Planners: map[string]PlanFunc{plan.KindScripted: nil}}.Validate()
	require.Error(t, err)
	for _, want := range []string{
		"fallback missing is not registered",
		"tool read is registered twice",
		"invalidates nowhere, which is not registered",
		`tool name "9lives"`,
		"tool hollow has no implementation",
		`planner "scripted"`,
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestConfigIsWhatRunsAreHeldTo(t *testing.T) {
	o := Options{
		Tools:            []tool.Tool{noop(tool.Spec{Name: "close", Destructive: true}), noop(tool.Spec{Name: "read"})},
		Planners:         map[string]PlanFunc{plan.KindOpenAI: func(context.Context, plan.Request) (plan.Decision, error) { return plan.Decision{}, nil }, plan.KindSupport: func(context.Context, plan.Request) (plan.Decision, error) { return plan.Decision{}, nil }},
		AllowAutoApprove: true,
	}
	require.NoError(t, o.Validate())
	cfg := o.Config()
	require.Equal(t, []string{"close", "read"}, []string{cfg.Tools[0].Name, cfg.Tools[1].Name})
	require.True(t, cfg.Tools[0].Destructive)
	require.Equal(t, []string{plan.KindOpenAI, plan.KindSupport}, cfg.Planners, "sorted, whatever the map order")
	require.True(t, cfg.AllowAutoApprove)
	require.False(t, cfg.SearchAttributes)
}

// recorder is a Registry that remembers what was registered.
type recorder struct{ names []string }

func (r *recorder) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	r.names = append(r.names, o.Name)
}
func (r *recorder) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	r.names = append(r.names, o.Name)
}

// A schema that would need a file or the network, or does not compile, is
// refused at registration, naming the tool, and nothing is registered.
func TestRegisterRefusesSchemasThatReachOutside(t *testing.T) {
	for name, schema := range map[string]string{
		"https":  `{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`,
		"file":   `{"$ref":"file:///etc/hostname"}`,
		"broken": `{"type":"object","required":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			err := Register(r, Options{Tools: []tool.Tool{
				noop(tool.Spec{Name: "fine"}),
				noop(tool.Spec{Name: "remote_" + name, Schema: json.RawMessage(schema)}),
			}})
			require.ErrorContains(t, err, "tool remote_"+name+": schema does not compile")
			require.Empty(t, r.names)
		})
	}
	r := &recorder{}
	require.NoError(t, Register(r, Options{Tools: []tool.Tool{noop(tool.Spec{Name: "fine",
		Schema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`)})}}))
	require.Contains(t, r.names, "fine")
}
