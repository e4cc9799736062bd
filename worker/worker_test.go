package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
