package tool

import (
	"context"
	"encoding/json"
)

// Proposal is a tool call as a planner proposes it: a tool name and its
// arguments (a JSON object). It carries no flags: whether the tool is
// destructive is decided by the worker's registration alone.
type Proposal struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Call is a proposal the run has accepted and numbered. IDs are deterministic
// over the whole session ("c-1", "c-2", …), continue-as-new included.
type Call struct {
	ID   string          `json:"call_id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Approval is the decision that let a call through.
type Approval struct {
	Approver string `json:"approver"`
	Note     string `json:"note,omitempty"`
	// Kind says what was approved. A tool's own guard must look for
	// ApprovedInterrupt: an approval at the gate was not given with the
	// guard's message in front of the reviewer.
	Kind DecisionKind `json:"kind"`
	// Data is the approver's answer to what the tool asked (an MCP server's
	// elicitation), given with an approval of its interrupt.
	Data json.RawMessage `json:"data,omitempty"`
	// Proof are the signed decisions that made it, under a worker's policy:
	// each approver's token. The worker that signs the call's permit
	// verifies them against its own policy (package permit).
	Proof []string `json:"proof,omitempty"`
}

// DecisionKind says what a decision is for: the call at the gate
// (ApprovedAtGate), the run's always_approve policy (ApprovedByPolicy), or
// the question the tool itself raised with an interrupt (ApprovedInterrupt).
type DecisionKind string

// Decision kinds.
const (
	ApprovedAtGate    DecisionKind = "gate"
	ApprovedByPolicy  DecisionKind = "policy"
	ApprovedInterrupt DecisionKind = "interrupt"
	// ApprovedByRule: an allow rule of the worker's policy let the call through.
	ApprovedByRule DecisionKind = "rule"
	// ApprovedByGrant: an approver's grant for the run let the call through.
	ApprovedByGrant DecisionKind = "grant"
)

// InterruptApproved reports whether a human approved the interrupt this
// tool raised for the call ctx serves: a guard that interrupted may now commit.
func InterruptApproved(ctx context.Context) bool {
	info, ok := InfoFrom(ctx)
	return ok && info.Approval != nil && info.Approval.Kind == ApprovedInterrupt
}

// Request is what a tool's activity receives.
type Request struct {
	// CallID is the run's id for this call ("c-3").
	CallID string `json:"call_id"`
	// IdempotencyKey is derived from the workflow id, the run chain, the
	// call id and its arguments (ArgsKey); it is the same on every attempt,
	// after a worker crash, a resume, continue-as-new and a rewind, so a side
	// effect keyed by it happens once; a new run under a reused workflow id,
	// a fork, and a rewound call with other arguments get new keys.
	IdempotencyKey string `json:"idempotency_key"`
	// Args are the call's exact arguments.
	Args json.RawMessage `json:"args"`
	// Approval is set when a human approved this call (at the gate, or after
	// the tool itself raised an interrupt).
	Approval *Approval `json:"approval,omitempty"`
	// Permit is the proof the gate's worker signed for this activity of
	// this call (package permit): the activity checks it before it runs.
	Permit string `json:"permit,omitempty"`
}

// IdempotencyKey derives a call's idempotency key: workflowID/chainID/callID.
// chainID is the run id of the chain's first run (Temporal's
// firstExecutionRunId), which continue-as-new, retries and resets keep and a
// new start under the same workflow id does not. Runs started before rules
// version 3 pass "" and keep the key workflowID/callID they started with.
func IdempotencyKey(workflowID, chainID, callID string) string {
	if chainID == "" {
		return workflowID + "/" + callID
	}
	return workflowID + "/" + chainID + "/" + callID
}

// ArgsKey is the idempotency key of runs of rules version 7 and later: the
// key IdempotencyKey derives, then "/" and the first 16 hex digits of the
// call's args_digest. The same call — same id, same arguments — has the same
// key on every attempt and after a rewind; a rewound run that proposes the
// call id again with other arguments gets another key, so a tool that
// answers a repeated key with what it stored never hands one call's result to
// another.
func ArgsKey(key, argsDigest string) string {
	if len(argsDigest) > 16 {
		argsDigest = argsDigest[:16]
	}
	return key + "/" + argsDigest
}

// Response is what a tool's activity returns.
type Response struct {
	Result json.RawMessage `json:"result"`
	// Attempt is the attempt that produced the result (1 for the first).
	Attempt int32 `json:"attempt"`
}

type infoKey struct{}

// Info is what a tool implementation can learn about the call it serves.
type Info struct {
	CallID         string
	IdempotencyKey string
	Approval       *Approval
	Attempt        int32
}

// WithInfo returns a context carrying info; the worker calls it before a tool runs.
func WithInfo(ctx context.Context, info Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the call info of the tool call ctx serves.
func InfoFrom(ctx context.Context) (Info, bool) {
	info, ok := ctx.Value(infoKey{}).(Info)
	return info, ok
}
