package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/tool"
)

// This file holds how a run hears from outside: its queries, the approve and
// reject updates, and the signals it applies or refuses.

// registerHandlers sets up queries, updates and the signal listener.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryNext, func() ([]string, error) { return r.next(), nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (State, error) { return r.state(), nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryTrace, func() ([]TraceRecord, error) { return r.Trace, nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryCheckRewind, func(n RewindNote) (string, error) {
		if !r.ready {
			return "", errors.New("the run is not configured yet: try again")
		}
		by, _, err := r.checkRewind(n)
		return by, err
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryTool, func(name string) (tool.Spec, error) {
		spec, ok := r.specs[name]
		if !ok {
			return spec, fmt.Errorf("this run holds no tool named %q", clip(name, MaxNameBytes))
		}
		return spec, nil
	}); err != nil {
		return err
	}
	for _, u := range []struct {
		name string
		verb verb
	}{{UpdateApprove, verbApprove}, {UpdateReject, verbReject}, {UpdateRespond, verbRespond}} {
		// The payload is taken raw and decoded strictly: a typo such as
		// "args_digset" or a key given twice is refused, never skipped.
		err := workflow.SetUpdateHandlerWithOptions(ctx, u.name,
			func(ctx workflow.Context, raw json.RawMessage) (DecisionResult, error) {
				in, err := r.decodeDecision(raw)
				if err != nil {
					return DecisionResult{}, asFailure(err)
				}
				res, err := r.decide(ctx, u.verb, in)
				return res, asFailure(err)
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error {
				in, err := r.decodeDecision(raw)
				if err == nil {
					_, _, err = r.validateDecision(in, u.verb)
				}
				return asFailure(err)
			}})
		if err != nil {
			return err
		}
	}
	if err := r.registerGrantHandlers(ctx); err != nil {
		return err
	}
	r.root = ctx
	if err := r.registerExternal(ctx); err != nil {
		return err
	}
	if err := r.registerWithdraw(ctx); err != nil {
		return err
	}
	workflow.Go(ctx, r.listen)
	return nil
}

// listen applies signals as they arrive, for the life of the run.
// A run that took up parked calls waits until it is configured: those calls
// are pending from its first task, and no decision on them may be taken
// before its policy is loaded.
func (r *run) listen(ctx workflow.Context) {
	// Every run waits (a reset may re-run its first task with a signal in
	// it: a rewind's note is checked against the policy, which is loaded
	// only then).
	for ctx.Err() == nil {
		if workflow.Await(ctx, func() bool {
			return len(workflow.GetUnhandledSignalNames(ctx)) > 0 && r.ready
		}) != nil {
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
	return []string{SignalReject, SignalRespond, SignalApprove, SignalMessage, SignalEnd, SignalRewound}
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
	if name == SignalEnd { // nothing in its payload is used: `temporal workflow signal --name end` sends none
		r.Ended = true
		return
	}
	raw, err := jsonPayload(rv)
	refuse := func(callID string, err error) { r.refuse(name, callID, raw, err) }
	if err != nil {
		refuse("", err)
		return
	}
	switch name {
	case SignalApprove, SignalReject, SignalRespond:
		in, err := r.decodeDecision(raw)
		if err != nil {
			refuse("", err)
			return
		}
		if _, err := r.decide(ctx, verb(name), in); err != nil {
			refuse(in.CallID, err)
		}
	case SignalMessage:
		var in MessageInput
		switch err := r.decode(raw, &in); {
		case err != nil || strings.TrimSpace(in.Text) == "":
			refuse("", fmt.Errorf("message refused: want {\"text\": \"…\"} with some text"))
		case !r.in.Session:
			refuse("", fmt.Errorf("message refused: this run is not a session (start it with \"session\": true to send it messages)"))
		case len(in.Text) > MaxMessageBytes:
			refuse("", fmt.Errorf("message refused: %d bytes, at most %d", len(in.Text), MaxMessageBytes))
		case len(r.Messages) >= MaxQueuedMessages:
			refuse("", fmt.Errorf("message refused: %d messages already wait for their turn", len(r.Messages)))
		default:
			r.Messages = append(r.Messages, in.Text)
		}
	case SignalRewound:
		var n RewindNote
		if err := r.decode(raw, &n); err != nil {
			refuse("", fmt.Errorf("rewind note refused: %v", err))
			return
		}
		if err := r.rewound(ctx, n); err != nil {
			refuse(n.CallID, err)
		}
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
	r.Refused = append(r.Refused, rec)
	if over := len(r.Refused) - maxRefusals; over > 0 {
		r.Refused = r.Refused[over:]
	}
}
