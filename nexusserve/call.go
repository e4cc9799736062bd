package nexusserve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// This file is the workflow behind a call operation: it proposes the call to
// the session run, waits until the call has ended, and answers its outcome.
// Cancelled (the caller cancelled its operation), it withdraws the call if
// the call still waits for a human; a call that began to run is not undone,
// and its outcome is still the answer.

// Activity names of the call workflow.
const (
	ActivityPropose  = "ToolgateNexusPropose"
	ActivityAwait    = "ToolgateNexusAwait"
	ActivityWithdraw = "ToolgateNexusWithdraw"
)

// RefusedType is the failure type of a call the run or toolgate refused (an
// unknown tool, a bad start, a closed run): not retried.
const RefusedType = "ToolgateRefused"

// AwaitWindow is how long one Await activity watches a call before it
// reports it unfinished and the workflow starts another: a call that waits
// for days adds a few events an AwaitWindow, not an activity that runs for
// days.
const AwaitWindow = 30 * time.Minute

// CallRequest is the input of the call workflow: the call, checked, and the
// run it goes to.
type CallRequest struct {
	Run      string              `json:"run"` // the session run's workflow id
	Proposal workflows.Proposal  `json:"proposal"`
	Start    *workflows.RunInput `json:"start,omitempty"`
	// NeedsSignedStart: no start was given and the worker has a policy, so
	// the call goes only to a run that is running.
	NeedsSignedStart bool `json:"needs_signed_start,omitempty"`
}

// workflowID is the call workflow's id.
func (r CallRequest) workflowID() string { return CallWorkflowID(r.Run, r.Proposal.Key) }

// CallWorkflowID is the workflow id of the call workflow of the call with
// idempotency key key to run (a workflow id: RunID of the caller's name):
// one per run and key, so two operations with one key attach to one
// workflow (and one call).
func CallWorkflowID(run, key string) string {
	sum := sha256.Sum256([]byte(run + "\x00" + key))
	return "toolgate-call-" + run + "-" + hex.EncodeToString(sum[:12])
}

// CallRef names a proposed call: its run, id and key.
type CallRef struct {
	Run    string `json:"run"`
	CallID string `json:"call_id"`
	Key    string `json:"key"`
	Reason string `json:"reason,omitempty"` // a withdrawal's
}

// Withdrawal is what the withdraw activity answers: the call withdrawn
// (ended cancelled), or why it was not (it was decided or runs).
type Withdrawal struct {
	Withdrawn bool                 `json:"withdrawn"`
	Call      workflows.CallStatus `json:"call"`
	Why       string               `json:"why,omitempty"`
}

var (
	// proposing: a proposal is tried until the run takes or refuses it (a
	// run with MaxOpenCalls calls open answers busy until one ends, which
	// may take as long as a human does).
	proposing = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
	quick = workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
	watch = workflow.ActivityOptions{
		StartToCloseTimeout: AwaitWindow + time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, NonRetryableErrorTypes: []string{RefusedType}},
	}
)

// Call is the call workflow (CallWorkflow).
func Call(ctx workflow.Context, req CallRequest) (CallOutput, error) {
	// The proposal is made whatever comes meanwhile (it is quick, and
	// keyed): a cancel that arrives now finds the call id to withdraw.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	dctx = workflow.WithActivityOptions(dctx, proposing)
	var st workflows.CallStatus
	if err := workflow.ExecuteActivity(dctx, ActivityPropose, req).Get(dctx, &st); err != nil {
		return CallOutput{}, err
	}
	ref := CallRef{Run: req.Run, CallID: st.CallID, Key: req.Proposal.Key}
	attached := st.Attached
	wctx := workflow.WithActivityOptions(ctx, watch)
	for !st.Done {
		if ctx.Err() != nil {
			return withdraw(ctx, ref)
		}
		err := workflow.ExecuteActivity(wctx, ActivityAwait, ref).Get(wctx, &st)
		switch {
		case err == nil:
		case temporal.IsCanceledError(err) && ctx.Err() != nil:
			return withdraw(ctx, ref)
		default:
			return CallOutput{}, err
		}
	}
	st.Attached = attached
	return output(req.Run, st), nil
}

// withdraw takes the call back after the caller cancelled its operation: the
// workflow ends cancelled. A call decided or running meanwhile goes on, and
// its outcome is the answer.
func withdraw(ctx workflow.Context, ref CallRef) (CallOutput, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	ref.Reason = "the caller cancelled its Nexus operation"
	var w Withdrawal
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, quick), ActivityWithdraw, ref).Get(dctx, &w); err != nil {
		return CallOutput{}, err
	}
	if w.Withdrawn {
		return CallOutput{}, temporal.NewCanceledError(fmt.Sprintf("call %s (%s) of run %s withdrawn: %s", w.Call.CallID, w.Call.Tool, ref.Run, w.Call.Error))
	}
	workflow.GetLogger(ctx).Info("a cancelled call was not withdrawn; waiting for its outcome", "run", ref.Run, "call", ref.CallID, "why", w.Why)
	st := w.Call
	wctx := workflow.WithActivityOptions(dctx, watch)
	for !st.Done {
		if err := workflow.ExecuteActivity(wctx, ActivityAwait, ref).Get(wctx, &st); err != nil {
			return CallOutput{}, err
		}
	}
	return output(ref.Run, st), nil
}

// output is the operation's answer for a call that has ended.
func output(run string, st workflows.CallStatus) CallOutput {
	return CallOutput{Run: run, CallID: st.CallID, Tool: st.Tool, ArgsDigest: st.ArgsDigest, Status: st.Status,
		Result: st.Result, ResultDropped: st.ResultDropped, Error: st.Error, Note: st.Note, Attached: st.Attached}
}
