package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

type searchArgs struct {
	Query string `json:"query"`
}

type ticketArgs struct {
	TicketID string `json:"ticket_id"`
}

type orderArgs struct {
	OrderID string `json:"order_id"`
}

type refundArgs struct {
	BookingID   string `json:"booking_id"`
	AmountCents int    `json:"amount_cents"`
	Reason      string `json:"reason,omitempty"`
}

// tools are the seed's desk tools, in memory, and a carrier lookup that
// always fails into its fallback.
func tools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec{Name: "search_tickets"}, func(ctx context.Context, a searchArgs) (map[string]any, error) {
			return map[string]any{"tickets": []map[string]string{{"id": "TKT-3", "title": "Cannot log in"}}}, nil
		}),
		tool.New(tool.Spec{Name: "close_ticket", Destructive: true, Invalidates: []string{"search_tickets"}},
			func(ctx context.Context, a ticketArgs) (map[string]string, error) {
				return map[string]string{"id": a.TicketID, "status": "closed"}, nil
			}),
		tool.New(tool.Spec{Name: "carrier_status", Fallback: "cached_status", Retry: tool.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}},
			func(ctx context.Context, a orderArgs) (string, error) {
				return "", errors.New("carrier API unavailable")
			}),
		tool.New(tool.Spec{Name: "cached_status"}, func(ctx context.Context, a orderArgs) (map[string]string, error) {
			return map[string]string{"order_id": a.OrderID, "status": "shipped"}, nil
		}),
		tool.New(tool.Spec{Name: "refund", Destructive: true}, func(ctx context.Context, a refundArgs) (map[string]string, error) {
			return map[string]string{"booking_id": a.BookingID, "status": "refunded"}, nil
		}),
	}
}

func call(toolName, args string) tool.Proposal {
	return tool.Proposal{Tool: toolName, Args: json.RawMessage(args)}
}

// traced is a test environment whose worker traces into an in-memory recorder.
func traced(t *testing.T, o worker.Options) (*testsuite.TestWorkflowEnvironment, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ics, err := tracing.Interceptors(tp)
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quiet())
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: ics, DeadlockDetectionTimeout: 30 * time.Second})
	o.Tools = tools()
	o.PermitClaimer = permit.NewMemoryClaimer() // no server to claim destructive permits on
	if o.Ledger == nil {                        // no server: the fleet ledger (its pauses, its guards) in memory
		m, err := ledger.NewMemory(o.Policy)
		require.NoError(t, err)
		o.Ledger = m
	}
	require.NoError(t, worker.Register(env, o))
	return env, rec
}

func quiet() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

func run(t *testing.T, env *testsuite.TestWorkflowEnvironment, in workflows.RunInput) workflows.RunResult {
	t.Helper()
	env.ExecuteWorkflow(workflows.WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.RunResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

// describe renders toolgate's spans, in the order they ended, as their name
// and every attribute (without the "toolgate." prefix), sorted; and checks
// that each is a child of the SDK's workflow span.
func describe(t *testing.T, rec *tracetest.SpanRecorder) []string {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	var out []string
	for _, s := range rec.Ended() {
		if s.Name() == "RunWorkflow:"+workflows.WorkflowName {
			root = s
		}
	}
	require.NotNil(t, root, "the SDK's workflow span")
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "toolgate.") {
			continue
		}
		require.Equal(t, root.SpanContext().TraceID(), s.SpanContext().TraceID(), s.Name())
		require.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), "%s: a child of the workflow span", s.Name())
		require.False(t, s.EndTime().Before(s.StartTime()), s.Name())
		var attrs []string
		for _, a := range s.Attributes() {
			attrs = append(attrs, strings.TrimPrefix(string(a.Key), "toolgate.")+"="+a.Value.String())
		}
		slices.Sort(attrs)
		line := s.Name() + " " + strings.Join(attrs, " ")
		if s.Status().Description != "" {
			line += " error=" + s.Status().Description
		}
		out = append(out, line)
	}
	return out
}

// The seed's walk-through (search, the same search answered from the memo,
// close TKT-3 approved by alice), then a lookup that fails three times and
// falls back: toolgate's spans, exactly, as children of the workflow span.
func TestSeedWalkThroughSpans(t *testing.T) {
	env, rec := traced(t, worker.Options{})
	env.RegisterDelayedCallback(func() {
		digest, err := tool.Digest("close_ticket", json.RawMessage(`{"ticket_id":"TKT-3"}`))
		require.NoError(t, err)
		env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: "c-3", Approver: "alice", ArgsDigest: digest})
	}, time.Minute)
	res := run(t, env, workflows.RunInput{Goal: "find the login ticket and close it", Planner: plan.Config{Kind: plan.KindScripted, Answer: "done",
		Turns: [][]tool.Proposal{
			{call("search_tickets", `{"query":"login"}`)},
			{call("search_tickets", `{"query":"login"}`)},
			{call("close_ticket", `{"ticket_id":"TKT-3"}`)},
			{call("carrier_status", `{"order_id":"O-1"}`)},
		}}})
	require.Equal(t, workflows.StatusCompleted, res.Status)

	plan := func(step, calls int) string {
		return fmt.Sprintf("toolgate.plan plan.answered=%t plan.calls=%d plan.planner=scripted plan.step=%d turn=1", calls == 0, calls, step)
	}
	require.Equal(t, []string{
		plan(1, 1),
		"toolgate.gate call_id=c-1 gate.decision=passed gate.destructive=false gate.waited=false tool=search_tickets turn=1",
		"toolgate.memo call_id=c-1 memo=miss tool=search_tickets turn=1",
		"toolgate.run call_id=c-1 run.attempts=1 run.local=false run.round=1 run.status=ok tool=search_tickets turn=1",
		plan(2, 1),
		"toolgate.gate call_id=c-2 gate.decision=passed gate.destructive=false gate.waited=false tool=search_tickets turn=1",
		"toolgate.memo call_id=c-2 memo=hit tool=search_tickets turn=1",
		plan(3, 1),
		"toolgate.gate call_id=c-3 gate.approver=alice gate.decision=approved gate.destructive=true gate.waited=true tool=close_ticket turn=1",
		"toolgate.run call_id=c-3 run.attempts=1 run.local=false run.round=1 run.status=ok tool=close_ticket turn=1",
		plan(4, 1),
		"toolgate.gate call_id=c-4 gate.decision=passed gate.destructive=false gate.waited=false tool=carrier_status turn=1",
		"toolgate.memo call_id=c-4 memo=miss tool=carrier_status turn=1",
		"toolgate.run call_id=c-4 run.attempts=3 run.local=false run.round=1 run.status=error tool=carrier_status turn=1 error=carrier API unavailable",
		"toolgate.gate call_id=c-5 gate.decision=passed gate.destructive=false gate.waited=false tool=cached_status turn=1",
		"toolgate.memo call_id=c-5 memo=miss tool=cached_status turn=1",
		"toolgate.run call_id=c-5 run.attempts=1 run.local=false run.round=1 run.status=ok tool=cached_status turn=1",
		"toolgate.fallback call_id=c-4 fallback.call_id=c-5 fallback.from=carrier_status fallback.status=ok fallback.to=cached_status tool=carrier_status turn=1",
		plan(5, 0),
	}, describe(t, rec))
}

// Under a policy, the gate's span names the rule that decided: an allow rule
// (its approver is the rule) and a deny rule.
func TestGateSpansNameTheRule(t *testing.T) {
	pub, _, err := signed.GenerateKey()
	require.NoError(t, err)
	p, err := policy.Parse(fmt.Appendf(nil, `
approvers:
  bob: {key: %q, roles: [finance]}
tools:
  refund:
    rules:
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: no-test-refunds, when: "args.reason.contains('test')", decide: deny}
    approvers: {roles: [finance]}
`, signed.FormatPublicKey(pub)))
	require.NoError(t, err)
	env, rec := traced(t, worker.Options{Policy: p})
	run(t, env, workflows.RunInput{Goal: "refunds", Planner: plan.Config{Kind: plan.KindScripted, Answer: "done",
		Turns: [][]tool.Proposal{{
			call("refund", `{"booking_id":"BK-1","amount_cents":2500,"reason":"late"}`),
			call("refund", `{"booking_id":"BK-2","amount_cents":9000,"reason":"a test"}`),
		}}}})
	var gates []string
	for _, line := range describe(t, rec) {
		if strings.HasPrefix(line, "toolgate.gate ") {
			gates = append(gates, line)
		}
	}
	require.Equal(t, []string{
		"toolgate.gate call_id=c-1 gate.approver=rule:small-refunds gate.decision=approved gate.destructive=true gate.rule=small-refunds gate.waited=false tool=refund turn=1",
		"toolgate.gate call_id=c-2 gate.decision=blocked gate.destructive=true gate.rule=no-test-refunds gate.waited=false tool=refund turn=1",
	}, gates)
}

// Replaying recorded histories (every flow of testsuite/histories, and the
// fleet ledger's) with the tracing interceptors reports no toolgate span:
// each step was reported when it first ran. The SDK's workflow span shows
// the interceptors were there.
func TestReplayReportsNoToolgateSpans(t *testing.T) {
	files, err := filepath.Glob("../testsuite/histories/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ics, err := tracing.Interceptors(tp)
		require.NoError(t, err)
		r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Interceptors: ics})
		require.NoError(t, err)
		r.RegisterWorkflowWithOptions(workflows.AgentRun, workflow.RegisterOptions{Name: workflows.WorkflowName})
		r.RegisterWorkflowWithOptions(ledger.Ledger, workflow.RegisterOptions{Name: ledger.WorkflowName})
		r.RegisterWorkflowWithOptions(nexusserve.Call, workflow.RegisterOptions{Name: nexusserve.CallWorkflow})
		f, err := os.Open(file)
		require.NoError(t, err)
		hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		require.NoError(t, f.Close())
		require.NoError(t, err)
		var opts sdkworker.ReplayWorkflowHistoryOptions
		opts.OriginalExecution.ID = hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
		require.NoError(t, r.ReplayWorkflowHistoryWithOptions(quiet(), hist, opts), file)
		require.NoError(t, tp.Shutdown(context.Background()))

		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
		}
		switch wfType := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName(); wfType {
		case ledger.WorkflowName:
			// The ledger's history is taken while it runs: its workflow span
			// never ends, its updates' spans do.
			require.Contains(t, names, "HandleUpdate:"+ledger.UpdateReserve, file)
		default:
			require.Contains(t, names, "RunWorkflow:"+wfType, file)
		}
		for _, name := range names {
			require.False(t, strings.HasPrefix(name, "toolgate."), "%s: replay reported %s (all: %v)", file, name, names)
		}
	}
}
