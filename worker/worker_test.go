package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
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
type recorder struct {
	names      []string
	activities map[string]any
}

func (r *recorder) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	r.names = append(r.names, o.Name)
}
func (r *recorder) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	r.names = append(r.names, o.Name)
	if r.activities == nil {
		r.activities = map[string]any{}
	}
	r.activities[o.Name] = a
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

// A Go tool whose description or schema is over its bound fails the worker's
// start, naming the tool and the bound; nothing is registered.
func TestRegisterRefusesOversizedSpecs(t *testing.T) {
	r := &recorder{}
	err := Register(r, Options{Tools: []tool.Tool{
		noop(tool.Spec{Name: "fine"}),
		noop(tool.Spec{Name: "chatty", Description: strings.Repeat("d", tool.MaxDescriptionBytes+1)}),
		noop(tool.Spec{Name: "sprawling", Schema: json.RawMessage(`{"description":"` + strings.Repeat("s", tool.MaxSchemaBytes) + `"}`)}),
	}})
	require.ErrorContains(t, err, "tool chatty: its description has 8193 bytes, more than the 8192")
	require.ErrorContains(t, err, "tool sprawling: its schema has")
	require.Empty(t, r.names)
}

// Tools each within their bounds whose specs add up to more than
// MaxConfigBytes fail the worker's start, naming the largest.
func TestValidateRefusesAConfigOverItsBound(t *testing.T) {
	var tools []tool.Tool
	for i := range 10 {
		pad := strings.Repeat("s", tool.MaxSchemaBytes-100+i) // the last declared is the largest
		tools = append(tools, noop(tool.Spec{Name: fmt.Sprintf("t%d", i), Schema: json.RawMessage(`{"description":"` + pad + `"}`)}))
	}
	o := Options{Tools: tools}
	raw, err := json.Marshal(o.Config())
	require.NoError(t, err)
	require.Greater(t, len(raw), MaxConfigBytes)
	err = o.Validate()
	require.ErrorContains(t, err, fmt.Sprintf("is %d bytes, more than %d (worker.MaxConfigBytes); the largest tools: t9 (", len(raw), MaxConfigBytes))
	require.ErrorContains(t, err, "t5 (")
	require.NotContains(t, err.Error(), "t4 (", "the five largest are named")

	o.Tools = tools[:7]
	require.NoError(t, o.Validate())
}

// The run keeps at most workflows.MaxValueBytes of a result; the worker
// reports no more than that.
func TestResultBoundIsTheRunsBound(t *testing.T) {
	require.Equal(t, workflows.MaxValueBytes, tool.MaxResultBytes)
}

// Every tool's activity is registered bounded: a result over
// tool.MaxResultBytes is reported as a success with the run's marker, and a
// failure of megabytes is cut to tool.MaxErrorBytes, its type kept.
func TestRegisterBoundsWhatToolsReturn(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	big := tool.New(tool.Spec{Name: "big", Local: true}, func(context.Context, struct{}) (string, error) { return huge, nil })
	bigWrite := tool.New(tool.Spec{Name: "big_write", Destructive: true}, func(context.Context, struct{}) (map[string]string, error) {
		return map[string]string{"written": huge}, nil
	})
	fails := tool.New(tool.Spec{Name: "fails"}, func(context.Context, struct{}) (string, error) {
		return "", tool.Permanent(errors.New(huge))
	})
	r := &recorder{}
	mem, err := ledger.NewMemory(nil) // no server here: the pauses are an in-process ledger's
	require.NoError(t, err)
	o := Options{Tools: []tool.Tool{big, bigWrite, fails}, PermitClaimer: permit.NewMemoryClaimer(), Ledger: mem}
	require.NoError(t, Register(r, o))
	sign, ok := r.activities[workflows.PermitActivity].(func(context.Context, workflows.PermitRequest) (string, error))
	require.True(t, ok, "the permit activity registered as %T", r.activities[workflows.PermitActivity])
	// call runs a registered tool as an activity of the test environment
	// (its workflow, run, activity id "0" and task queue), with the permit
	// the worker signs for it.
	call := func(name string) (tool.Response, error) {
		fn, ok := r.activities[name].(tool.ActivityFunc)
		require.True(t, ok, "%s registered as %T", name, r.activities[name])
		req := tool.Request{CallID: "c-1", IdempotencyKey: "k-1", Args: json.RawMessage(`{}`)}
		d, err := tool.Digest(name, req.Args)
		require.NoError(t, err)
		c := permit.Claims{WorkflowID: "default-test-workflow-id", RunID: "default-test-run-id", ActivityID: "0", Activity: name,
			TaskQueue: "default-test-taskqueue", CallID: "c-1", Tool: name, ArgsDigest: d, Key: req.IdempotencyKey, Rules: workflows.RulesDigest(o.Config(), name)}
		if name == "big_write" {
			req.Approval = &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}
			c.Approver, c.Kind = "alice", string(tool.ApprovedAtGate)
		}
		req.Permit, err = sign(context.Background(), workflows.PermitRequest{Claims: c, Args: req.Args})
		require.NoError(t, err)
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
		val, err := env.ExecuteActivity(name, req)
		var resp tool.Response
		if err == nil {
			err = val.Get(&resp)
		}
		return resp, err
	}
	for _, name := range []string{"big", "big_write"} {
		resp, err := call(name)
		require.NoError(t, err, "%s: a result too big is still a success", name)
		var marker map[string]tool.Truncated
		require.NoError(t, json.Unmarshal(resp.Result, &marker), "%s: %.200s", name, resp.Result)
		require.Greater(t, marker["truncated"].Bytes, 3<<20)
		require.LessOrEqual(t, len(resp.Result), tool.MaxResultBytes)
	}
	_, err = call("fails")
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, tool.TypeToolFailure, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Contains(t, ae.Message(), "…[truncated: ")
	require.Less(t, len(ae.Error()), tool.MaxErrorBytes)
}

// A tool without an implementation is one another worker hosts, and says on
// which task queue; one worker hosts a tool, never two.
func TestRemoteToolsNeedATaskQueueAndNoImplementation(t *testing.T) {
	run := func(context.Context, tool.Request) (tool.Response, error) { return tool.Response{}, nil }
	remote := tool.Tool{Spec: tool.Spec{Name: "refund_ts", TaskQueue: "ts-tools", Destructive: true}}
	require.NoError(t, Options{Tools: []tool.Tool{remote}}.Validate())
	require.ErrorContains(t, Options{Tools: []tool.Tool{{Spec: tool.Spec{Name: "orphan"}}}}.Validate(), "tool orphan has no implementation (and no task_queue")
	both := remote
	both.Run = run
	require.ErrorContains(t, Options{Tools: []tool.Tool{both}}.Validate(), "one worker hosts a tool")
}
