package workflows_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// This file tests the boundaries between the stages of a call's path
// (pipeline.go): what is done at each — a span begins or ends, the fleet
// ledger reserves or hears how the call ended, the call's last record is
// written — and in which order, as one timeline of what the run did outside
// itself: spans (from a Tracer), the ledger's reservations and settlements
// (from a Backend that wraps the in-memory ledger) and tool activities.

// timeline is what a run did outside itself, in order.
type timeline struct {
	mu     sync.Mutex
	events []string
}

func (l *timeline) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *timeline) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// stageTracer is a workflows.Tracer that puts each span on the timeline
// when it begins and when it ends, with the attributes a stage boundary
// gave it (the call id and tool left out).
type stageTracer struct{ l *timeline }

type stageSpan struct {
	l    *timeline
	name string
}

func (t stageTracer) StartSpan(_ workflow.Context, name string, _ time.Time) workflows.Span {
	t.l.add("+%s", strings.TrimPrefix(name, "toolgate."))
	return stageSpan{l: t.l, name: name}
}

func (s stageSpan) End(errText string, attrs ...attribute.KeyValue) {
	var kv []string
	for _, a := range attrs {
		switch a.Key {
		case workflows.AttrCallID, workflows.AttrTool, workflows.AttrTurn:
			continue
		}
		kv = append(kv, strings.TrimPrefix(string(a.Key), "toolgate.")+"="+a.Value.String())
	}
	if errText != "" {
		kv = append(kv, "error="+errText)
	}
	s.l.add("-%s %s", strings.TrimPrefix(s.name, "toolgate."), strings.Join(kv, " "))
}

// tracerInterceptor puts a Tracer in every run's context, as package
// tracing does.
type tracerInterceptor struct {
	interceptor.WorkerInterceptorBase
	t workflows.Tracer
}

type tracerInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	t workflows.Tracer
}

func (i *tracerInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &tracerInbound{t: i.t}
	in.Next = next
	return in
}

func (i *tracerInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflows.WithTracer(ctx, i.t), in)
}

// ledgerSpy is the in-memory ledger, with each reservation and settlement
// on the timeline.
type ledgerSpy struct {
	*ledger.Memory
	l *timeline
}

func (s ledgerSpy) Reserve(ctx context.Context, r ledger.Reservation) (ledger.Verdict, error) {
	v, err := s.Memory.Reserve(ctx, r)
	s.l.add("ledger reserve %s %s: %s", r.CallID, r.Stage, v.Decide)
	return v, err
}

func (s ledgerSpy) Settle(ctx context.Context, st ledger.Settlement) (ledger.Settled, error) {
	out, err := s.Memory.Settle(ctx, st)
	what := "release"
	if st.Commit {
		what = "commit"
	}
	s.l.add("ledger %s %s", what, st.Tool)
	return out, err
}

// boundaryFixture is a fixture whose run reports to a timeline: its spans,
// its ledger's reservations and settlements (under s's policy of guards, or
// no policy when s is nil), and the tool activities it starts.
func boundaryFixture(t *testing.T, s *signers) (*fixture, *timeline) {
	l := &timeline{}
	var opts []fixtureOption
	if s != nil {
		m, err := ledger.NewMemory(s.policy)
		require.NoError(t, err)
		opts = append(opts, withPolicy(s.policy), func(o *worker.Options) { o.Ledger = ledgerSpy{Memory: m, l: l} })
	}
	f := newFixture(t, opts...)
	f.env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{&tracerInterceptor{t: stageTracer{l: l}}},
		DeadlockDetectionTimeout: 30 * time.Second})
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if !strings.HasPrefix(info.ActivityType.Name, "plan.") && !strings.HasPrefix(info.ActivityType.Name, "toolgate.") {
			l.add("tool %s", info.ActivityID)
		}
	})
	return f, l
}

// callTimeline is the timeline without the planner's spans.
func callTimeline(l *timeline) []string {
	var out []string
	for _, e := range l.get() {
		if !strings.HasPrefix(e, "+plan") && !strings.HasPrefix(e, "-plan") {
			out = append(out, e)
		}
	}
	return out
}

// check → end: a call whose arguments its schema refuses ends at the check,
// with its error as its last record; no span, and the ledger never hears of
// it, though its tool is one a guard covers.
func TestBoundaryCheckEnds(t *testing.T) {
	f, l := boundaryFixture(t, guardSigners(t))
	res := f.run(scripted(steps(call("refund", `[1]`))))
	require.Equal(t, []string{"error"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Empty(t, callTimeline(l))
}

// gate → guard → decide → memo → run → end: a refund a rule allows is
// reserved by the ledger within the gate's span; the gate's span ends with
// the rule's approval when the call leaves the gate; the run's span holds
// the tool's activity, and the ledger commits the call before the span
// ends with the ok its last record says.
func TestBoundaryRuleAllowsThenRuns(t *testing.T) {
	f, l := boundaryFixture(t, guardSigners(t))
	res := f.run(scripted(steps(refundCall(3000, ""))))
	require.Equal(t, []string{"reserved", "approved", "ok"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Equal(t, []string{
		"+gate",
		"ledger reserve c-1 gate: reserved",
		"-gate gate.destructive=true gate.decision=approved gate.waited=false gate.rule=small-refunds gate.approver=rule:small-refunds",
		"+run",
		"tool c-1",
		"ledger commit refund",
		"-run run.round=1 run.local=false run.status=ok run.attempts=1",
	}, callTimeline(l))
}

// guard → end: a call the ledger refuses ends in the gate's span, blocked by
// the guard; the ledger, which holds nothing of it, hears nothing more.
func TestBoundaryGuardRefuses(t *testing.T) {
	f, l := boundaryFixture(t, guardSigners(t))
	res := f.run(scripted(steps(refundCall(20000, ""))))
	require.Equal(t, []string{"blocked"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Equal(t, []string{
		"+gate",
		"ledger reserve c-1 gate: denied",
		"-gate gate.destructive=true gate.decision=blocked gate.waited=false gate.rule=guard:refund-budget",
	}, callTimeline(l))
}

// decide → ask → wait → end: a rejected call ends in the gate's span; the
// ledger releases it before the span ends with the rejection, who made it,
// and that the call waited.
func TestBoundaryWaitRejects(t *testing.T) {
	s := guardSigners(t)
	f, l := boundaryFixture(t, s)
	var bob *updateOutcome
	f.at(time.Minute, func() { bob = s.decide(f, "bob", signed.ActionReject, "c-1", nil) })
	res := f.run(scripted(steps(refundCall(8000, ""))))
	require.NoError(t, bob.err)
	require.Equal(t, []string{"reserved", "blocked", "rejected", "released"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Equal(t, []string{
		"+gate",
		"ledger reserve c-1 gate: reserved",
		"ledger release refund",
		"-gate gate.destructive=true gate.decision=rejected gate.waited=true gate.approver=bob",
	}, callTimeline(l))
}

// wait → guard → memo → run: an approved call is checked by the ledger again
// (stage decided) before the gate's span ends; then it runs.
func TestBoundaryWaitApproves(t *testing.T) {
	s := guardSigners(t)
	f, l := boundaryFixture(t, s)
	var bob *updateOutcome
	f.at(time.Minute, func() { bob = s.decide(f, "bob", signed.ActionApprove, "c-1", nil) })
	res := f.run(scripted(steps(refundCall(8000, ""))))
	require.NoError(t, bob.err)
	require.Equal(t, []string{"reserved", "blocked", "approved", "reserved", "ok"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Equal(t, []string{
		"+gate",
		"ledger reserve c-1 gate: reserved",
		"ledger reserve c-1 decided: reserved",
		"-gate gate.destructive=true gate.decision=approved gate.waited=true gate.approver=bob",
		"+run",
		"tool c-1",
		"ledger commit refund",
		"-run run.round=1 run.local=false run.status=ok run.attempts=1",
	}, callTimeline(l))
}

// memo → end, memo → run: a read passes the gate in its span, then the
// memo's: a miss goes on to the run; a repeat ends at the memo, a hit.
func TestBoundaryMemo(t *testing.T) {
	f, l := boundaryFixture(t, nil)
	search := call("search_tickets", `{"query":"login"}`)
	res := f.run(scripted(steps(search), steps(search)))
	require.Equal(t, []string{"cache_hit"}, traceStatuses(byCall(res.Trace)["c-2"]))
	require.Equal(t, []string{
		"+gate", "-gate gate.destructive=false gate.decision=passed gate.waited=false",
		"+memo", "-memo memo=miss",
		"+run", "tool c-1", "-run run.round=1 run.local=false run.status=ok run.attempts=1",
		"+gate", "-gate gate.destructive=false gate.decision=passed gate.waited=false",
		"+memo", "-memo memo=hit",
	}, callTimeline(l))
}

// run → ask → wait → run: a tool's own question ends the run's span,
// interrupted; the wait on it reports no span; once answered, the next
// round has a span of its own.
func TestBoundaryToolAsks(t *testing.T) {
	f, l := boundaryFixture(t, nil)
	f.at(time.Minute, func() { f.approve("c-1") })
	f.at(2*time.Minute, func() { f.approveInterrupt("c-1") })
	res := f.run(scripted(steps(call("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--"}`))))
	require.Equal(t, []string{"blocked", "approved", "interrupted", "approved", "ok"}, traceStatuses(byCall(res.Trace)["c-1"]))
	require.Equal(t, []string{
		"+gate", "-gate gate.destructive=true gate.decision=approved gate.waited=true gate.approver=alice",
		"+run", "tool c-1", "-run run.round=1 run.local=false run.status=interrupted run.attempts=1",
		"+run", "tool c-1#2", "-run run.round=2 run.local=false run.status=ok run.attempts=1",
	}, callTimeline(l))
}

// run → fallback → end: a read that used up its attempts ends its run's
// span failed; the fallback's span holds the fallback call's whole path.
func TestBoundaryFallback(t *testing.T) {
	f, l := boundaryFixture(t, nil)
	res := f.run(scripted(steps(call("carrier_status", `{"order_id":"O-1"}`))))
	calls := byCall(res.Trace)
	require.Equal(t, []string{"fallback"}, traceStatuses(calls["c-1"]))
	require.Equal(t, []string{"ok"}, traceStatuses(calls["c-2"]))
	require.Equal(t, []string{
		"+gate", "-gate gate.destructive=false gate.decision=passed gate.waited=false",
		"+memo", "-memo memo=miss",
		"+run", "tool c-1", "tool c-1", "tool c-1", "-run run.round=1 run.local=false run.status=error run.attempts=3 error=carrier API unavailable",
		"+fallback",
		"+gate", "-gate gate.destructive=false gate.decision=passed gate.waited=false",
		"+memo", "-memo memo=miss",
		"+run", "tool c-2", "-run run.round=1 run.local=false run.status=ok run.attempts=1",
		"-fallback fallback.from=carrier_status fallback.to=cached_status fallback.call_id=c-2 fallback.status=ok",
	}, callTimeline(l))
}

// wait → end, parked: a wait that parks carries the call's depth in its
// chain of fallbacks and the round of its tool's question, whichever stage
// asked it, so the next run goes on from there (a fallback whose own
// question parked was carried at depth 0 before the path was one pipeline).
func TestBoundaryWaitParksWhereItStands(t *testing.T) {
	withBooker := func(o *worker.Options) {
		o.Tools = append(o.Tools, tool.New(tool.Spec{Name: "flaky_booker", Fallback: "book_hotel", Retry: tool.RetryPolicy{MaxAttempts: 1}},
			func(ctx context.Context, a bookArgs) (string, error) {
				return "", errors.New("booking API unavailable")
			}))
	}
	f := newFixture(t, withBooker)
	in := scripted(steps(call("flaky_booker", `{"guest":"Robert'); DROP TABLE bookings;--"}`)))
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Minute, func() { f.approve("c-2") }) // the fallback, at the gate; then book_hotel asks
			f.at(2*time.Minute, func() {
				require.Equal(t, workflows.KindInterrupt, f.state().Interrupts[0].Kind)
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(time.Minute, func() { f.approveInterrupt("c-2") })
		}
	})
	require.Len(t, inputs, 2)
	parked := inputs[1].Carry.Parked
	require.Len(t, parked, 1)
	require.Equal(t, 1, parked[0].Depth, "the fallback of the call proposed")
	require.Equal(t, 1, parked[0].Round, "book_hotel's first round asked")
	require.Equal(t, "flaky_booker", parked[0].FallbackOf[0].Call.Tool)
	calls := byCall(res.Trace)
	require.Equal(t, workflows.TraceOK, calls["c-2"][len(calls["c-2"])-1].Status)
	require.Len(t, f.desk.bookings, 1)
}

// bookingPolicy guards bookings with a rate guard, and lets support
// approve them.
const bookingPolicy = `
approvers:
  alice: {key: "%s", roles: [support]}
  bob:   {key: "%s", roles: [support]}
tools:
  book_hotel:
    approvers: {roles: [support]}
guards:
  - {id: bookings, kind: rate, tools: [book_hotel], limit: 5, window: 1h}
`

// wait → end, taken up: a guarded call whose tool's question parked, and
// which a human rejects in the next run, is released by the ledger as it
// would have been in the run that asked: a rejected call never stays
// counted toward a guard.
func TestBoundaryResumedQuestionReleases(t *testing.T) {
	s := guardSigners(t)
	p, err := policy.Parse([]byte(fmt.Sprintf(bookingPolicy,
		signed.FormatPublicKey(s.keys["alice"].Public().(ed25519.PublicKey)), signed.FormatPublicKey(s.keys["bob"].Public().(ed25519.PublicKey)))))
	require.NoError(t, err)
	s.policy = p
	f := newFixture(t, withPolicy(p))
	asInterrupt := func(c *signed.Claims, in *workflows.DecisionInput) {
		c.Kind, in.Kind = string(workflows.KindInterrupt), workflows.KindInterrupt
	}
	var approved, rejected *updateOutcome
	res, inputs := runToEnd(t, f, scripted(steps(call("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--"}`))), func(run int, f *fixture) {
		switch run {
		case 0:
			f.at(time.Minute, func() { approved = s.decide(f, "alice", signed.ActionApprove, "c-1", nil) })
			f.at(2*time.Minute, func() {
				_, reserved := budgetUse(t, f.ledger, "bookings")
				require.Equal(t, int64(1), reserved, "counted while the tool's question waits")
				f.env.SetContinueAsNewSuggested(true)
				f.env.SignalWorkflow(workflows.SignalEnd, nil)
			})
		case 1:
			f.at(time.Minute, func() { rejected = s.decide(f, "bob", signed.ActionReject, "c-1", asInterrupt) })
		}
	})
	require.Len(t, inputs, 2, "the question parked")
	require.NoError(t, approved.err)
	require.NoError(t, rejected.err)
	require.Equal(t, []string{"reserved", "blocked", "approved", "reserved", "interrupted", "rejected", "released"}, traceStatuses(byCall(res.Trace)["c-1"]))
	committed, reserved := budgetUse(t, f.ledger, "bookings")
	require.Zero(t, committed)
	require.Zero(t, reserved, "the rejected booking no longer counts")
}
