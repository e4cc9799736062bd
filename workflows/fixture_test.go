package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// desk is an in-memory stand-in for the support desk: it counts every tool
// run and keeps side effects keyed by idempotency key, like the real one.
type desk struct {
	mu        sync.Mutex
	runs      map[string]int             // tool -> activity executions (attempts)
	closed    map[string]int             // ticket -> close calls that changed or saw it
	payments  map[string]json.RawMessage // idempotency key -> payment
	bookings  map[string]string          // idempotency key -> guest
	approvals []*tool.Approval           // what book_hotel saw, per run
	failAfter map[string]int             // tool -> attempts that fail after the side effect
	requests  []plan.Request             // what the recording planner was shown
}

func newDesk() *desk {
	return &desk{runs: map[string]int{}, closed: map[string]int{}, payments: map[string]json.RawMessage{},
		bookings: map[string]string{}, failAfter: map[string]int{}}
}

func (d *desk) count(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[name]
}

func (d *desk) ran(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs[name]++
	return d.runs[name]
}

type searchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

type ticketArgs struct {
	TicketID string `json:"ticket_id"`
}

type refundArgs struct {
	BookingID   string `json:"booking_id"`
	AmountCents int    `json:"amount_cents"`
}

type bookArgs struct {
	Guest string `json:"guest"`
}

type bigArgs struct {
	Query string `json:"query"`
	KB    int    `json:"kb"`
}

type orderArgs struct {
	OrderID string `json:"order_id"`
}

const objectSchema = `{"type":"object"}`

func (d *desk) tools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec{Name: "search_tickets", Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["query"],"additionalProperties":false}`)},
			func(ctx context.Context, a searchArgs) (map[string]any, error) {
				d.ran("search_tickets")
				if strings.Contains(a.Query, "login") {
					return map[string]any{"tickets": []map[string]string{{"id": "TKT-3", "title": "Cannot log in"}}}, nil
				}
				return map[string]any{"tickets": []string{}}, nil
			}),
		tool.New(tool.Spec{Name: "close_ticket", Destructive: true, Invalidates: []string{"search_tickets"},
			Schema: json.RawMessage(`{"type":"object","properties":{"ticket_id":{"type":"string"}},"required":["ticket_id"]}`)},
			func(ctx context.Context, a ticketArgs) (map[string]any, error) {
				d.ran("close_ticket")
				d.mu.Lock()
				defer d.mu.Unlock()
				d.closed[a.TicketID]++
				return map[string]any{"id": a.TicketID, "status": "closed"}, nil
			}),
		tool.New(tool.Spec{Name: "refund", Destructive: true, Schema: json.RawMessage(objectSchema), Retry: tool.RetryPolicy{InitialInterval: time.Millisecond}},
			func(ctx context.Context, a refundArgs) (json.RawMessage, error) {
				attempt := d.ran("refund")
				info, _ := tool.InfoFrom(ctx)
				d.mu.Lock()
				defer d.mu.Unlock()
				if p, ok := d.payments[info.IdempotencyKey]; ok {
					return p, nil
				}
				p := json.RawMessage(fmt.Sprintf(`{"payment_id":"P-%d","booking_id":%q,"amount_cents":%d}`, len(d.payments)+1, a.BookingID, a.AmountCents))
				d.payments[info.IdempotencyKey] = p
				if attempt <= d.failAfter["refund"] {
					return nil, errors.New("worker lost after the payment was written")
				}
				return p, nil
			}),
		tool.New(tool.Spec{Name: "book_hotel", Destructive: true, Schema: json.RawMessage(objectSchema)},
			func(ctx context.Context, a bookArgs) (map[string]string, error) {
				d.ran("book_hotel")
				info, _ := tool.InfoFrom(ctx)
				d.mu.Lock()
				defer d.mu.Unlock()
				d.approvals = append(d.approvals, info.Approval)
				if strings.ContainsAny(a.Guest, "';") && !tool.InterruptApproved(ctx) {
					return nil, tool.Interrupt("compliance: guest name looks like SQL injection")
				}
				d.bookings[info.IdempotencyKey] = a.Guest
				return map[string]string{"booking_id": "BK-9", "guest": a.Guest}, nil
			}),
		tool.New(tool.Spec{Name: "carrier_status", Fallback: "cached_status", Retry: tool.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}},
			func(ctx context.Context, a orderArgs) (string, error) {
				d.ran("carrier_status")
				return "", errors.New("carrier API unavailable")
			}),
		tool.New(tool.Spec{Name: "cached_status"},
			func(ctx context.Context, a orderArgs) (map[string]any, error) {
				d.ran("cached_status")
				return map[string]any{"order_id": a.OrderID, "status": "shipped", "stale": true}, nil
			}),
		tool.New(tool.Spec{Name: "strict_lookup", Fallback: "cached_status", Retry: tool.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}},
			func(ctx context.Context, a orderArgs) (string, error) {
				d.ran("strict_lookup")
				return "", tool.Permanent(fmt.Errorf("order %s does not exist", a.OrderID))
			}),
		tool.New(tool.Spec{Name: "cancel_order", Destructive: true},
			func(ctx context.Context, a orderArgs) (map[string]string, error) {
				d.ran("cancel_order")
				return map[string]string{"order_id": a.OrderID, "status": "cancelled"}, nil
			}),
		tool.New(tool.Spec{Name: "carrier_cancel", Fallback: "cancel_order", Retry: tool.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}},
			func(ctx context.Context, a orderArgs) (string, error) {
				d.ran("carrier_cancel")
				return "", errors.New("carrier API unavailable")
			}),
		tool.New(tool.Spec{Name: "big_read"},
			func(ctx context.Context, a bigArgs) (string, error) {
				d.ran("big_read")
				return strings.Repeat("<", a.KB<<10), nil
			}),
		tool.New(tool.Spec{Name: "ask_read", Schema: json.RawMessage(objectSchema)}, // a read that asks a human first
			func(ctx context.Context, a searchArgs) (string, error) {
				d.ran("ask_read")
				if !tool.InterruptApproved(ctx) {
					return "", tool.Interrupt("this read shows personal data: may it?")
				}
				return "read " + a.Query, nil
			}),
		tool.New(tool.Spec{Name: "fast_read", Local: true},
			func(ctx context.Context, a searchArgs) (string, error) {
				d.ran("fast_read")
				return "fast " + a.Query, nil
			}),
	}
}

// recordingPlanner is a "support"-kind planner activity that follows the
// scripted steps but keeps every request, so tests can see what the planner
// was told.
func (d *desk) recordingPlanner(ctx context.Context, req plan.Request) (plan.Decision, error) {
	d.mu.Lock()
	d.requests = append(d.requests, req)
	d.mu.Unlock()
	return plan.Scripted(req.Config, req.Step), nil
}

type fixture struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	desk    *desk
	updates int
	waiting int            // callbacks registered with at that have not run yet
	ledger  *ledger.Memory // the fleet ledger of a fixture with a policy
	claims  *permit.MemoryClaimer
	used    map[string]string // marker workflow id → claimant (ClaimActivity)
	// unrecorded: the links the fixture's notifier reports have no record
	// (LinksActivity keeps none), as a forged delivery's.
	unrecorded bool
	usedMu     sync.Mutex
	opts       []fixtureOption // what the fixture's worker was registered with
}

type fixtureOption func(*worker.Options)

func allowAutoApprove(o *worker.Options) { o.AllowAutoApprove = true }

func newFixture(t *testing.T, opts ...fixtureOption) *fixture {
	return newFixtureWith(t, newDesk(), opts...)
}

// newFixtureWith is newFixture over an existing desk (a worker restart, or
// the next run after continue-as-new, sees the same side effects).
func newFixtureWith(t *testing.T, d *desk, opts ...fixtureOption) *fixture {
	t.Helper()
	f := bareFixture(t, d)
	f.opts = opts
	require.NoError(t, registerOn(f, f.desk, opts...))
	return f
}

// bareFixture is a fixture over d whose environment has nothing registered yet.
func bareFixture(t *testing.T, d *desk) *fixture {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := suite.NewTestWorkflowEnvironment()
	if raceDetector {
		// A workflow task that yields within the SDK's default 1 s may take
		// several seconds under the race detector on a busy machine; the
		// deadlock detector is for code that blocks, not for slow builds.
		env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	}
	return &fixture{t: t, env: env, desk: d}
}

// registerOn registers the workflow, d's tools and its recording planner on f's environment.
func registerOn(f *fixture, d *desk, opts ...fixtureOption) error {
	o := worker.Options{Tools: d.tools(), Planners: map[string]worker.PlanFunc{plan.KindSupport: d.recordingPlanner}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.Ledger == nil { // the fleet ledger, in memory (without a policy, only its pauses count)
		if f.ledger == nil {
			m, err := ledger.NewMemory(o.Policy)
			if err != nil {
				return err
			}
			f.ledger = m
		}
		o.Ledger = f.ledger
	}
	if o.PermitClaimer == nil { // no server to claim destructive permits on
		if f.claims == nil {
			f.claims = permit.NewMemoryClaimer()
		}
		o.PermitClaimer = f.claims
	}
	if err := worker.Register(f.env, o); err != nil {
		return err
	}
	// Uses are claimed as on the server: the first claimant takes the
	// marker's id, the same claimant again is answered alike, any other
	// is refused.
	if f.used == nil {
		f.used = map[string]string{}
	}
	f.env.OnActivity(workflows.ClaimActivity, mock.Anything, mock.Anything).Return(func(ctx context.Context, req workflows.ClaimRequest) error {
		info := activity.GetInfo(ctx)
		claimant := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
		f.usedMu.Lock()
		defer f.usedMu.Unlock()
		if by, ok := f.used[req.WorkflowID]; ok && by != claimant {
			return temporal.NewNonRetryableApplicationError("used already: "+req.WorkflowID, workflows.UsedError, nil)
		}
		f.used[req.WorkflowID] = claimant
		return nil
	}).Maybe()
	// A delivery's links are recorded by the worker that sends them: here
	// every link the fixture's notifier reports is (f.unrecorded: none is).
	f.env.OnActivity(workflows.LinksActivity, mock.Anything, mock.Anything).Return(func(_ context.Context, req workflows.LinksRequest) ([]workflows.LinkProof, error) {
		if f.unrecorded {
			return []workflows.LinkProof{}, nil
		}
		return req.Links, nil
	}).Maybe()
	if m := f.ledger; m != nil && o.Ledger == ledger.Backend(m) {
		// A run settles by signal: the fixture's ledger takes it.
		f.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, ledger.SignalSettle, mock.Anything).Return(
			func(_, _, _, _ string, arg any) error {
				s, ok := arg.(ledger.Settlement)
				if !ok {
					return fmt.Errorf("settle signal of %T, want ledger.Settlement", arg)
				}
				_, err := m.Settle(context.Background(), s)
				return err
			})
	}
	return nil
}

// call builds a proposal from a tool name and JSON arguments.
func call(toolName, args string) tool.Proposal {
	return tool.Proposal{Tool: toolName, Args: json.RawMessage(args)}
}

// scripted builds a scripted-planner input.
func scripted(steps ...[]tool.Proposal) workflows.RunInput {
	return workflows.RunInput{Goal: "find the login ticket and close it", Planner: plan.Config{Kind: plan.KindScripted, Turns: steps, Answer: "done"}}
}

func steps(s ...tool.Proposal) []tool.Proposal { return s }

// at runs fn when the workflow's clock reaches d. run fails if the workflow
// ended before it ran: a callback that never fires asserts nothing.
func (f *fixture) at(d time.Duration, fn func()) {
	f.waiting++
	f.env.RegisterDelayedCallback(func() { f.waiting--; fn() }, d)
}

func (f *fixture) run(in workflows.RunInput) workflows.RunResult {
	f.t.Helper()
	f.env.ExecuteWorkflow(workflows.WorkflowName, in)
	require.True(f.t, f.env.IsWorkflowCompleted())
	require.NoError(f.t, f.env.GetWorkflowError())
	require.Zero(f.t, f.waiting, "the run ended before every callback registered with at ran")
	var res workflows.RunResult
	require.NoError(f.t, f.env.GetWorkflowResult(&res))
	return res
}

func (f *fixture) state() workflows.State {
	f.t.Helper()
	v, err := f.env.QueryWorkflow(workflows.QueryState)
	require.NoError(f.t, err)
	var s workflows.State
	require.NoError(f.t, v.Get(&s))
	return s
}

func (f *fixture) next() []string {
	f.t.Helper()
	v, err := f.env.QueryWorkflow(workflows.QueryNext)
	require.NoError(f.t, err)
	var n []string
	require.NoError(f.t, v.Get(&n))
	return n
}

// digest is the args_digest state shows for a waiting call, as an operator
// reads it before deciding ("" if the call is not waiting).
func (f *fixture) digest(callID string) string {
	for _, it := range f.state().Interrupts {
		if it.CallID == callID {
			return it.ArgsDigest
		}
	}
	return ""
}

// asked is the requested_at (Unix nanoseconds) state shows for a waiting
// call: a signed decision names the question it answers.
func (f *fixture) asked(callID string) int64 {
	for _, it := range f.state().Interrupts {
		if it.CallID == callID {
			return it.RequestedAt.UnixNano()
		}
	}
	return 0
}

func (f *fixture) approve(callID string) {
	f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: callID, Approver: "alice", ArgsDigest: f.digest(callID)})
}

func (f *fixture) reject(callID, reason string) {
	f.env.SignalWorkflow(workflows.SignalReject, workflows.DecisionInput{CallID: callID, Approver: "bob", Reason: reason, ArgsDigest: f.digest(callID)})
}

// approveInterrupt approves the question a tool raised (kind "interrupt").
func (f *fixture) approveInterrupt(callID string) {
	f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: callID, Approver: "alice", Kind: "interrupt", ArgsDigest: f.digest(callID)})
}

func (f *fixture) rejectInterrupt(callID, reason string) {
	f.env.SignalWorkflow(workflows.SignalReject, workflows.DecisionInput{CallID: callID, Approver: "bob", Reason: reason, Kind: "interrupt", ArgsDigest: f.digest(callID)})
}

// continued makes the next run look continued from an AgentRun on this
// task queue (what ChainActivity would find on a real server).
func (f *fixture) continued() {
	f.env.SetContinuedExecutionRunID("previous-run")
	f.env.OnActivity(workflows.ChainActivity, mock.Anything, workflows.ChainRequest{WorkflowID: "default-test-workflow-id", RunID: "previous-run"}).
		Return(workflows.ChainInfo{WorkflowType: workflows.WorkflowName, TaskQueue: "default-test-taskqueue", Status: "ContinuedAsNew"}, nil)
}

// outcome is filled in when the workflow has handled an update whose
// result is a T.
type outcome[T any] struct {
	done   bool
	result T
	err    error
}

// updateOutcome is the outcome of a decision sent as an update.
type updateOutcome = outcome[workflows.DecisionResult]

// sendUpdate sends an update; the outcome is filled in once the workflow has
// validated (and, if accepted, handled) it.
func sendUpdate[T any](f *fixture, name string, in any) *outcome[T] {
	out := &outcome[T]{}
	f.updates++
	f.env.UpdateWorkflow(name, fmt.Sprintf("u-%d", f.updates), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { out.done, out.err = true, err },
		OnComplete: func(v any, err error) {
			out.done, out.err = true, err
			if err == nil {
				out.result = v.(T)
			}
		},
	}, in)
	return out
}

// update sends a decision as an update.
func (f *fixture) update(name string, in any) *updateOutcome {
	return sendUpdate[workflows.DecisionResult](f, name, in)
}

// statuses lists "call_id:tool:status" for each trace record, in order.
func statuses(trace []workflows.TraceRecord) []string {
	out := make([]string, len(trace))
	for i, r := range trace {
		out[i] = r.CallID + ":" + r.Tool + ":" + r.Status
	}
	return out
}
