package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
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
		Kind: kind, Reason: clip(reason, MaxTextBytes), RequestedAt: now, ExpiresAt: now.Add(timeout)}}
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
		if in.ArgsDigest == "" && r.version >= versionTrust {
			return nil, fmt.Errorf("args_digest is required: a decision for call %s (%s) must name the args_digest of the arguments its approver saw (the state query lists it with each interrupt)",
				p.CallID, p.Tool)
		}
		if in.ArgsDigest != "" && in.ArgsDigest != p.ArgsDigest {
			return nil, fmt.Errorf("args_digest %q does not match call %s (%s %s): the decision was made for other arguments",
				clip(in.ArgsDigest, 64), p.CallID, p.Tool, clip(string(p.CallArgs), 200))
		}
		if kind := in.Kind; r.version >= versionDecisionKind && kind != p.Kind && !(kind == "" && p.Kind == KindGate) {
			if p.Kind == KindInterrupt {
				return nil, fmt.Errorf("call %s is held by %s's own check (%s): a decision for it must say \"kind\":\"interrupt\", so an approval meant for the gate cannot answer it",
					p.CallID, p.Tool, clip(p.Reason, 200))
			}
			return nil, fmt.Errorf("call %s waits at the gate, not on an interrupt: kind %q does not fit", p.CallID, clip(kind, 32))
		}
		return p, nil
	}
	return nil, r.notWaiting(in.CallID)
}

// notWaiting says why a call id names no call waiting for a decision.
func (r *run) notWaiting(id string) error {
	var n int
	if _, err := fmt.Sscanf(id, "c-%d", &n); err != nil || n < 1 || fmt.Sprintf("c-%d", n) != id {
		return fmt.Errorf("call %q is not a call id of this run (they are c-1, c-2, …)", clip(id, MaxNameBytes))
	}
	switch {
	case n <= r.calls:
		return fmt.Errorf("call %s is not waiting for a decision (already decided, or it never needed one)", id)
	case r.calls == 0:
		return fmt.Errorf("call %s has not been proposed yet: this run has proposed no call so far", id)
	default:
		return fmt.Errorf("call %s has not been proposed yet: this run's calls so far are c-1 … c-%d", id, r.calls)
	}
}

// decide applies an approval (approve) or a rejection to a pending call.
func (r *run) decide(approve bool, in DecisionInput) (DecisionResult, error) {
	p, err := r.validateDecision(in)
	if err != nil {
		return DecisionResult{}, err
	}
	approver := clip(strings.TrimSpace(in.Approver), MaxNameBytes)
	if approver == "" {
		approver = "(unnamed)"
	}
	p.decided, p.by = true, approver
	res := DecisionResult{CallID: p.CallID, Tool: p.Tool, Approver: approver}
	if approve {
		p.approval = &tool.Approval{Approver: approver, Note: clip(in.Note, MaxTextBytes), Kind: p.Kind}
		res.Decision = TraceApproved
	} else {
		p.reason = clip(strings.TrimSpace(in.Reason), MaxTextBytes)
		if p.reason == "" {
			p.reason = "no reason given"
		}
		res.Decision = TraceRejected
	}
	return res, nil
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
		// The payload is taken raw and decoded strictly: a typo such as
		// "args_digset" or a key given twice is refused, never skipped.
		err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, raw json.RawMessage) (DecisionResult, error) {
				in, err := decodeDecision(raw)
				if err != nil {
					return DecisionResult{}, err
				}
				return r.decide(u.approve, in)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error {
				in, err := decodeDecision(raw)
				if err == nil {
					_, err = r.validateDecision(in)
				}
				return err
			}})
		if err != nil {
			return err
		}
	}
	workflow.Go(ctx, r.listen)
	return nil
}

// decodeDecision decodes an approve or reject payload strictly.
func decodeDecision(raw []byte) (DecisionInput, error) {
	var in DecisionInput
	if err := tool.DecodeStrict(raw, &in); err != nil {
		return DecisionInput{}, fmt.Errorf("decision payload refused (want {\"call_id\",\"args_digest\",\"approver\",\"note\"|\"reason\",\"kind\"}): %s", clip(err.Error(), 300))
	}
	return in, nil
}

// listen applies signals as they arrive, for the life of the run.
func (r *run) listen(ctx workflow.Context) {
	for ctx.Err() == nil {
		if workflow.Await(ctx, func() bool { return len(workflow.GetUnhandledSignalNames(ctx)) > 0 }) != nil {
			return
		}
		r.drain(ctx)
	}
}

// signalOrder is the order in which signals delivered in one workflow task
// are applied (Temporal does not tell the order of signals of different
// names within a task): a rejection before an approval, so when both arrive
// for one call at once the call is rejected and the approval is refused.
func signalOrder() []string {
	return []string{SignalReject, SignalApprove, SignalMessage, SignalEnd}
}

// drain applies every signal delivered but not yet applied — those of names
// the run does not know too, which it refuses (before continue-as-new, so
// none is lost; and by the listener, as they come).
func (r *run) drain(ctx workflow.Context) {
	names := workflow.GetUnhandledSignalNames(ctx)
	slices.Sort(names)
	for _, name := range append(signalOrder(), names...) {
		ch := workflow.GetSignalChannel(ctx, name)
		for ch.Len() > 0 {
			r.receive(ctx, ch, name)
		}
	}
}

// receive takes one signal from c and applies it, or refuses it with the
// reason (kept in state.refused): a payload that does not decode strictly, a
// decision that does not fit, a message the run cannot take, a name it does
// not know. The run goes on.
func (r *run) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string) {
	var rv converter.RawValue
	c.Receive(ctx, &rv)
	raw, err := jsonPayload(rv)
	refuse := func(callID string, err error) { r.refuse(name, callID, raw, err) }
	if err != nil {
		refuse("", err)
		return
	}
	switch name {
	case SignalApprove, SignalReject:
		in, err := decodeDecision(raw)
		if err != nil {
			refuse("", err)
			return
		}
		if _, err := r.decide(name == SignalApprove, in); err != nil {
			refuse(in.CallID, err)
		}
	case SignalMessage:
		var in MessageInput
		switch err := tool.DecodeStrict(raw, &in); {
		case err != nil || strings.TrimSpace(in.Text) == "":
			refuse("", fmt.Errorf("message refused: want {\"text\": \"…\"} with some text"))
		case !r.in.Session:
			refuse("", fmt.Errorf("message refused: this run is not a session (start it with \"session\": true to send it messages)"))
		case len(in.Text) > MaxMessageBytes:
			refuse("", fmt.Errorf("message refused: %d bytes, at most %d", len(in.Text), MaxMessageBytes))
		case len(r.messages) >= MaxQueuedMessages:
			refuse("", fmt.Errorf("message refused: %d messages already wait for their turn", len(r.messages)))
		default:
			r.messages = append(r.messages, in.Text)
		}
	case SignalEnd:
		r.ended = true
	default:
		refuse("", fmt.Errorf("signal %q is unknown: AgentRun takes %s", clip(name, MaxNameBytes), strings.Join(signalOrder(), ", ")))
	}
}

// jsonPayload returns a signal's payload as JSON bytes, or why it is not JSON.
func jsonPayload(rv converter.RawValue) ([]byte, error) {
	p := rv.Payload()
	if p == nil {
		return nil, fmt.Errorf("the signal has no payload")
	}
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != converter.MetadataEncodingJSON {
		return p.GetData(), fmt.Errorf("payload encoding %q refused: want %q", clip(enc, 64), converter.MetadataEncodingJSON)
	}
	return p.GetData(), nil
}

// refuse keeps a refused signal in state (the most recent maxRefusals), with
// the payload's size and digest but not the payload, and logs it.
func (r *run) refuse(name, callID string, payload []byte, err error) {
	rec := Refusal{Signal: clip(name, MaxNameBytes), CallID: clip(callID, MaxNameBytes), Error: clip(err.Error(), MaxTextBytes),
		PayloadBytes: len(payload), PayloadSHA256: sha256Hex(payload), At: r.now()}
	r.logger.Warn("signal refused", "signal", rec.Signal, "call_id", rec.CallID, "error", rec.Error)
	r.refused = append(r.refused, rec)
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
