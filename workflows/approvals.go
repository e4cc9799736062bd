package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// pending is a call paused for a human: the interrupt shown to operators and,
// once it arrives, the decision.
type pending struct {
	Interrupt
	decided  bool
	by       string         // who decided
	approval *tool.Approval // set when approved
	reason   string         // set when rejected
}

// maxRefusals bounds the refused decisions kept in state.
const maxRefusals = 20

// pause turns a ConfirmationRequired (kind gate) or a tool's interrupt (kind
// interrupt) into a wait for a human decision on this exact call. It returns
// the approval, or the outcome that ends the call: rejected (with the reason,
// which the planner receives) or expired (no decision in time: a rejection).
func (r *run) pause(ctx workflow.Context, c tool.Call, kind, reason string) (*tool.Approval, *outcome) {
	digest, _ := tool.Digest(c.Tool, c.Args)
	now := r.now()
	timeout := time.Duration(r.in.ApprovalTimeout)
	p := &pending{Interrupt: Interrupt{CallID: c.ID, Tool: c.Tool, CallArgs: c.Args, ArgsDigest: digest,
		Kind: kind, Reason: reason, RequestedAt: now, ExpiresAt: now.Add(timeout)}}
	r.pending = append(r.pending, p)
	r.publish(ctx)
	decided, err := r.awaitDecision(ctx, p, timeout)
	r.dropPending(p)
	r.publish(ctx)
	switch {
	case err != nil:
		return nil, &outcome{Status: TraceError, Error: "run cancelled while waiting for approval"}
	case !decided:
		msg := fmt.Sprintf("no decision within %s: treated as rejected", timeout)
		r.record(c, TraceRecord{Status: TraceExpired, Reason: msg})
		return nil, &outcome{Status: TraceExpired, Error: msg}
	case p.approval == nil:
		r.record(c, TraceRecord{Status: TraceRejected, Approver: p.by, Reason: p.reason})
		return nil, &outcome{Status: TraceRejected, Error: fmt.Sprintf("rejected by %s: %s", p.by, p.reason)}
	default:
		r.record(c, TraceRecord{Status: TraceApproved, Approver: p.approval.Approver, Reason: p.approval.Note})
		return p.approval, nil
	}
}

// awaitDecision waits until p is decided or timeout passes, and reports
// whether it was decided. Its timer is cancelled when the decision comes
// first, so a decided call leaves no timer to fire (and wake the run) later.
func (r *run) awaitDecision(ctx workflow.Context, p *pending, timeout time.Duration) (bool, error) {
	if r.version < versionCancelTimers {
		return workflow.AwaitWithTimeout(ctx, timeout, func() bool { return p.decided })
	}
	tctx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimer(tctx, timeout)
	err := workflow.Await(ctx, func() bool { return p.decided || timer.IsReady() })
	return p.decided, err
}

func (r *run) dropPending(p *pending) {
	for i, q := range r.pending {
		if q == p {
			r.pending = append(r.pending[:i:i], r.pending[i+1:]...)
			return
		}
	}
}

// validateDecision says why a decision cannot apply, or which pending call it decides.
func (r *run) validateDecision(in DecisionInput) (*pending, error) {
	if in.CallID == "" {
		return nil, fmt.Errorf("call_id is empty")
	}
	for _, p := range r.pending {
		if p.CallID != in.CallID || p.decided {
			continue
		}
		if in.ArgsDigest != "" && in.ArgsDigest != p.ArgsDigest {
			return nil, fmt.Errorf("args_digest %q does not match call %s (%s %s, digest %s): the decision was made for other arguments",
				in.ArgsDigest, p.CallID, p.Tool, p.CallArgs, p.ArgsDigest)
		}
		if kind := in.Kind; r.version >= versionDecisionKind && kind != p.Kind && !(kind == "" && p.Kind == KindGate) {
			if p.Kind == KindInterrupt {
				return nil, fmt.Errorf("call %s is held by %s's own check (%s): a decision for it must say \"kind\":\"interrupt\", so an approval meant for the gate cannot answer it",
					p.CallID, p.Tool, p.Reason)
			}
			return nil, fmt.Errorf("call %s waits at the gate, not on an interrupt: kind %q does not fit", p.CallID, kind)
		}
		return p, nil
	}
	var n int
	if _, err := fmt.Sscanf(in.CallID, "c-%d", &n); err == nil && n >= 1 && n <= r.calls && fmt.Sprintf("c-%d", n) == in.CallID {
		return nil, fmt.Errorf("call %s is not waiting for a decision (already decided, or it never needed one)", in.CallID)
	}
	return nil, fmt.Errorf("call %s is unknown to this run (its calls are c-1 … c-%d)", in.CallID, r.calls)
}

// decide applies an approval (approve) or a rejection to a pending call.
func (r *run) decide(approve bool, in DecisionInput) (DecisionResult, error) {
	p, err := r.validateDecision(in)
	if err != nil {
		return DecisionResult{}, err
	}
	approver := strings.TrimSpace(in.Approver)
	if approver == "" {
		approver = "(unnamed)"
	}
	p.decided, p.by = true, approver
	res := DecisionResult{CallID: p.CallID, Tool: p.Tool, Approver: approver}
	if approve {
		p.approval = &tool.Approval{Approver: approver, Note: in.Note, Kind: p.Kind}
		res.Decision = TraceApproved
	} else {
		p.reason = strings.TrimSpace(in.Reason)
		if p.reason == "" {
			p.reason = "no reason given"
		}
		res.Decision = TraceRejected
	}
	return res, nil
}

// onSignal applies a decision signal. A signal cannot be answered, so a
// refused one is logged and kept in state (refused) — never silently dropped,
// and never acted on: a duplicate approval is a no-op.
func (r *run) onSignal(name string, approve bool, in DecisionInput) {
	if _, err := r.decide(approve, in); err != nil {
		r.refuse(name, in, err)
	}
}

// registerHandlers sets up queries, updates and the signal listener.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryNext, func() ([]string, error) { return r.next(), nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) { return r.state(), nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryTrace, func() ([]TraceRecord, error) { return r.trace, nil }); err != nil {
		return err
	}
	for _, u := range []struct {
		name    string
		approve bool
	}{{UpdateApprove, true}, {UpdateReject, false}} {
		err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, in DecisionInput) (DecisionResult, error) { return r.decide(u.approve, in) },
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in DecisionInput) error {
				_, err := r.validateDecision(in)
				return err
			}})
		if err != nil {
			return err
		}
	}
	workflow.Go(ctx, r.listen)
	return nil
}

// signals are the run's signal channels.
type signals struct {
	approve, reject, message, end workflow.ReceiveChannel
}

func signalChannels(ctx workflow.Context) signals {
	return signals{
		approve: workflow.GetSignalChannel(ctx, SignalApprove),
		reject:  workflow.GetSignalChannel(ctx, SignalReject),
		message: workflow.GetSignalChannel(ctx, SignalMessage),
		end:     workflow.GetSignalChannel(ctx, SignalEnd),
	}
}

// listen applies signals as they arrive, for the life of the run.
func (r *run) listen(ctx workflow.Context) {
	ch := signalChannels(ctx)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(ch.approve, func(c workflow.ReceiveChannel, _ bool) { r.receive(ctx, c, SignalApprove) })
	sel.AddReceive(ch.reject, func(c workflow.ReceiveChannel, _ bool) { r.receive(ctx, c, SignalReject) })
	sel.AddReceive(ch.message, func(c workflow.ReceiveChannel, _ bool) { r.receive(ctx, c, SignalMessage) })
	sel.AddReceive(ch.end, func(c workflow.ReceiveChannel, _ bool) { r.receive(ctx, c, SignalEnd) })
	for ctx.Err() == nil {
		sel.Select(ctx)
	}
}

// drain applies every signal already delivered but not yet received (before
// continue-as-new, so none is lost).
func (r *run) drain(ctx workflow.Context) {
	ch := signalChannels(ctx)
	for _, s := range []struct {
		c    workflow.ReceiveChannel
		name string
	}{{ch.approve, SignalApprove}, {ch.reject, SignalReject}, {ch.message, SignalMessage}, {ch.end, SignalEnd}} {
		for s.c.Len() > 0 {
			r.receive(ctx, s.c, s.name)
		}
	}
}

// receive takes one signal from c and applies it. A payload that does not
// decode is refused with a clear error; the run goes on.
func (r *run) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string) {
	var raw json.RawMessage
	c.Receive(ctx, &raw)
	switch name {
	case SignalApprove, SignalReject:
		var in DecisionInput
		if err := decodeStrict(raw, &in); err != nil {
			r.refuse(name, in, fmt.Errorf("payload %s: %w", raw, err))
			return
		}
		r.onSignal(name, name == SignalApprove, in)
	case SignalMessage:
		var in MessageInput
		if err := decodeStrict(raw, &in); err != nil || strings.TrimSpace(in.Text) == "" {
			r.logger.Warn("message refused: want {\"text\": \"…\"}", "payload", string(raw))
			return
		}
		r.messages = append(r.messages, in.Text)
	case SignalEnd:
		r.ended = true
	}
}

func (r *run) refuse(name string, in DecisionInput, err error) {
	r.logger.Warn("decision refused", "signal", name, "call_id", in.CallID, "error", err.Error())
	r.refused = append(r.refused, Refusal{Signal: name, Input: in, Error: err.Error(), At: r.now()})
	if over := len(r.refused) - maxRefusals; over > 0 {
		r.refused = r.refused[over:]
	}
}

// next names the nodes waiting to run: "gate:<tool>" for a call held at the
// gate, "interrupt:<tool>" for a tool waiting on a human.
func (r *run) next() []string {
	out := []string{}
	for _, p := range r.pending {
		out = append(out, p.Node())
	}
	return out
}

func (r *run) status() string {
	switch {
	case r.done != "":
		return r.done
	case len(r.pending) > 0:
		return StatusWaitingForApproval
	case r.awaitingInput:
		return StatusWaitingForInput
	default:
		return StatusRunning
	}
}

func (r *run) state() State {
	interrupts := make([]Interrupt, 0, len(r.pending)) // [] rather than null in JSON
	for _, p := range r.pending {
		interrupts = append(interrupts, p.Interrupt)
	}
	return State{Status: r.status(), Turn: r.turn, Next: r.next(), Interrupts: interrupts, Memo: r.memo.stats(),
		Calls: r.calls, Answer: r.answer, Error: r.errText, BlockedOn: r.blockedOn, Refused: r.refused, TraceDropped: r.traceDropped}
}

// publish keeps what operators see current: the run's details in the Temporal
// UI and, when the namespace has them, toolgate's search attributes.
func (r *run) publish(ctx workflow.Context) {
	status := r.status()
	var waits []string
	var tools []string
	for _, p := range r.pending {
		waits = append(waits, fmt.Sprintf("%s %s %s (%s)", p.Tool, p.CallArgs, p.Kind, p.CallID))
		if !contains(tools, p.Tool) {
			tools = append(tools, p.Tool)
		}
	}
	details := status
	if len(waits) > 0 {
		details = "waiting for approval: " + strings.Join(waits, "; ")
	}
	if details == r.shown {
		return
	}
	r.shown = details
	workflow.SetCurrentDetails(ctx, details)
	if r.cfg.SearchAttributes {
		err := workflow.UpsertTypedSearchAttributes(ctx,
			temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus).ValueSet(status),
			temporal.NewSearchAttributeKeyKeywordList(SearchAttrPendingTools).ValueSet(append([]string{}, tools...)))
		if err != nil {
			r.logger.Warn("upserting search attributes", "error", err.Error())
		}
	}
}

// decodeStrict decodes a JSON payload, refusing unknown fields.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
