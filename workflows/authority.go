package workflows

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
)

// This file is the worker's policy at work in a run (rules version 4): which
// rule decides a call, who may decide what the rules ask a human for, and
// the proof that they did — a token signed with a key the policy declares.
// Everything here is deterministic: the policy is the one recorded in the
// run's history, and time is the workflow's.

// configurePolicy compiles the policy the run is held to, and verifies a
// signed start.
func (r *run) configurePolicy(ctx workflow.Context) error {
	pol := r.Config.Policy
	if pol == nil {
		if r.in.Carry == nil && r.in.RequestToken != "" {
			return errors.New("request_token refused: this worker has no policy (--policy) to verify it against")
		}
		return nil
	}
	if err := r.compilePolicy(); err != nil {
		return err
	}
	if r.policy == PolicyAlwaysApprove {
		return fmt.Errorf("approval %q refused: this worker's policy decides who approves what", PolicyAlwaysApprove)
	}
	if r.in.Carry != nil {
		return nil // a continued run keeps the chain's RequestedBy
	}
	if r.in.Fork != nil {
		return nil // a fork's token was checked before it read its source (authorizeFork)
	}
	if r.in.RequestToken == "" {
		if pol.RequireSignedStart {
			return errors.New("request_token required: this worker's policy takes only signed starts (require_signed_start), " +
				"so every run has a verified requester; start it with toolgate run --as NAME --key FILE, or a token made with package signed")
		}
		return nil
	}
	c, err := r.verifyToken(r.in.RequestToken)
	if err == nil {
		err = r.checkTarget(c, signed.ActionStart)
	}
	switch {
	case err != nil:
	case r.in.inputDigest == "" || c.InputDigest != r.in.inputDigest:
		err = fmt.Errorf("%s's token signs another input: its input_digest %q is not the digest of this run's input (goal, planner and every other field; workflows.InputDigest)",
			c.Approver, clip(c.InputDigest, 64))
	default:
		err = r.claimStart(ctx, r.in.RequestToken)
	}
	if err != nil {
		return fmt.Errorf("request_token refused: %w", err)
	}
	r.spend(r.in.RequestToken, c)
	r.RequestedBy = c.Approver
	return nil
}

// compilePolicy compiles the worker's policy the run is held to, once.
func (r *run) compilePolicy() error {
	if r.engine != nil {
		return nil
	}
	e, err := policy.Compile(r.Config.Policy)
	if err != nil {
		return fmt.Errorf("the worker's policy: %w", err)
	}
	r.engine, r.exprs = e, map[string]*policy.Expr{}
	return nil
}

// GoalDigest is the hex SHA-256 of a goal, as a signed start names it
// (goal_digest).
func GoalDigest(goal string) string { return sha256Hex([]byte(goal)) }

// DataDigest is the hex SHA-256 of the canonical JSON of an answer to a
// tool's question, as a signed approval names it (data_digest).
func DataDigest(data json.RawMessage) (string, error) {
	canon, err := tool.Canonical(data)
	if err != nil {
		return "", err
	}
	return sha256Hex(canon), nil
}

// verifyToken checks a token's signature against the key the policy gives
// its approver, and its time against the workflow's.
func (r *run) verifyToken(token string) (signed.Claims, error) {
	if token == "" {
		return signed.Claims{}, refusal(RefusedUnauthorized, "unsigned: this worker's policy takes only signed decisions "+
			"(toolgate approve|reject … --as NAME --key FILE, or a token made with package signed)")
	}
	c, err := signed.Peek(token)
	if err != nil {
		return c, refusal(RefusedUnauthorized, "token refused: %s", clip(err.Error(), 300))
	}
	key, ok := r.engine.Policy().Key(c.Approver)
	if !ok {
		return c, refusal(RefusedUnauthorized, "unknown approver %q: not an approver of this worker's policy", clip(c.Approver, MaxNameBytes))
	}
	signer := c.Approver + "'s key"
	if c.Via != "" {
		if key, err = r.viaKey(c); err != nil {
			return c, err
		}
		signer = "the policy's via_key"
	}
	if _, err := signed.Verify(token, key); err != nil {
		return c, refusal(RefusedUnauthorized, "bad signature: the token is not signed by %s (%s)", signer, clip(err.Error(), 200))
	}
	if err := c.CheckTime(r.now(), TokenSkew); err != nil {
		return c, refusal(RefusedUnauthorized, "%s's token refused: %s", c.Approver, clip(err.Error(), 300))
	}
	return c, r.checkFresh(token, c)
}

// viaKey is the key a decision by link (c.Via) must be signed with — the
// policy's via_key — if the policy lets c's approver decide that way.
func (r *run) viaKey(c signed.Claims) (ed25519.PublicKey, error) {
	if c.Action != signed.ActionApprove && c.Action != signed.ActionReject {
		// The link signer takes clicks on Approve and Reject, nothing else:
		// its key never grants, starts, rewinds nor answers in a tool's place.
		return nil, refusal(RefusedUnauthorized, "%s's token by link (via %s) signs %q: a decision by link may only approve or reject a call", c.Approver, clip(c.Via, 32), clip(c.Action, 32))
	}
	if c.EditedDigest != "" || c.DataDigest != "" || c.Grant != nil {
		// A click says yes or no to the call as shown; an edit, an answer to
		// the tool's question or a grant is the approver's own signed act.
		return nil, refusal(RefusedUnauthorized, "%s's token by link (via %s) edits, answers or grants: a decision by link approves or rejects the call as it is", c.Approver, clip(c.Via, 32))
	}
	pol := r.engine.Policy()
	if err := pol.DecidesVia(c.Approver, c.Via); err != nil {
		return nil, refusal(RefusedUnauthorized, "decision by link refused: %s", clip(err.Error(), 300))
	}
	key, ok := pol.ViaPublicKey()
	if !ok {
		return nil, refusal(RefusedUnauthorized, "decision by link refused: the policy's via_key does not parse")
	}
	return key, nil
}

// checkTarget makes sure a verified token was signed for this run and for
// this action.
func (r *run) checkTarget(c signed.Claims, action string) error {
	if c.Action != action {
		return refusal(RefusedUnauthorized, "%s's token signs %q, not %q", c.Approver, clip(c.Action, 32), action)
	}
	if wid := r.workflowID; c.WorkflowID != wid {
		return refusal(RefusedUnauthorized, "%s's token is for run %q, not this run (%q)", c.Approver, clip(c.WorkflowID, MaxNameBytes), wid)
	}
	return nil
}

// ruling is a decision as the run takes it: who, yes or no, why, and an edit.
type ruling struct {
	token            string        // the signed decision, spent when applied
	claims           signed.Claims // its claims
	approve          bool
	by, note, reason string
	editDigest       string // the token's edited_digest
	edit             *edit
	dataDigest       string          // the token's data_digest
	data             json.RawMessage // canonical: the answer to the tool's question
	verb             verb
	response         json.RawMessage // canonical: the answer given in the tool's place (respond)
	cancel           bool            // a rejection that cancels the call
	via              string          // the channel of a decision by link (slack, email)
	link             string          // the secret of the link a decision by link came through
}

// edit is an approver's replacement for a call's arguments, checked.
type edit struct {
	args    []byte // canonical
	digest  string
	verdict policy.Verdict
}

// verifyDecision checks a signed decision on p and returns the ruling it
// makes: the token's approver, note and reason, bound to this run, this call,
// this action and the arguments the approver saw.
func (r *run) verifyDecision(p *pending, in *DecisionInput, v verb) (ruling, error) {
	if len(in.Token) > signed.MaxTokenBytes {
		return ruling{}, refusal(RefusedUnauthorized, "token refused: %d bytes, at most %d", len(in.Token), signed.MaxTokenBytes)
	}
	c, err := r.verifyToken(in.Token)
	if err != nil {
		return ruling{}, err
	}
	if err := r.checkTarget(c, string(v)); err != nil {
		return ruling{}, err
	}
	switch {
	case c.CallID != in.CallID:
		return ruling{}, refusal(RefusedUnauthorized, "%s's token is for call %q, not %s", c.Approver, clip(c.CallID, MaxNameBytes), in.CallID)
	case tool.DecisionKind(c.Kind) != p.Kind && !(c.Kind == "" && p.Kind == KindGate):
		return ruling{}, refusal(RefusedUnauthorized, "%s's token answers kind %q; call %s waits on kind %q (%s)", c.Approver, clip(c.Kind, 32), p.CallID, p.Kind, clip(p.Reason, 200))
	case c.Asked != p.RequestedAt.UnixNano():
		return ruling{}, refusal(RefusedUnauthorized, "%s's token answers the question asked at %s; call %s was asked at %s (its requested_at): sign the current one",
			c.Approver, time.Unix(0, c.Asked).UTC().Format(time.RFC3339Nano), p.CallID, p.RequestedAt.UTC().Format(time.RFC3339Nano))
	case in.Approver != "" && in.Approver != c.Approver:
		return ruling{}, refusal(RefusedUnauthorized, "approver %q is not the token's (%s)", clip(in.Approver, MaxNameBytes), c.Approver)
	case in.Note != "" && in.Note != c.Note, in.Reason != "" && in.Reason != c.Reason:
		return ruling{}, refusal(RefusedDecision, "note and reason are the token's: leave them out of the payload or send the signed ones")
	case in.ArgsDigest != "" && in.ArgsDigest != c.ArgsDigest:
		return ruling{}, refusal(RefusedDigestMismatch, "args_digest %q is not the one %s's token signs", clip(in.ArgsDigest, 64), c.Approver)
	case in.Via != "" && in.Via != c.Via:
		return ruling{}, refusal(RefusedUnauthorized, "via %q is not the one %s's token signs (%q)", clip(in.Via, 32), c.Approver, clip(c.Via, 32))
	case in.Link != "" && in.Link != c.Link:
		return ruling{}, refusal(RefusedUnauthorized, "the link secret sent is not the one %s's token signs", c.Approver)
	}
	in.ArgsDigest = c.ArgsDigest // the digest the approver signed is the one checked against the call
	return ruling{token: in.Token, claims: c, approve: v == verbApprove, verb: v, cancel: in.Cancel, by: c.Approver, note: c.Note, reason: c.Reason,
		editDigest: c.EditedDigest, dataDigest: c.DataDigest, via: c.Via, link: c.Link}, nil
}

// mayDecide says why approver may not decide p: a role the call does not
// ask for, a run they requested, a second approval of theirs.
func (r *run) mayDecide(p *pending, approver string, approve bool) error {
	if err := r.engine.Policy().Eligible(approver, p.need); err != nil {
		return refusal(RefusedUnauthorized, "wrong role for call %s (%s%s): %s", p.CallID, p.Tool, ruleSuffix(p.Rule), clip(err.Error(), 300))
	}
	if why := r.selfOf(approver); why != "" {
		return refusal(RefusedUnauthorized, "self-approval refused: %s, so may decide none of its calls", why)
	}
	if approve && slices.Contains(p.ApprovedBy, approver) {
		return refusal(RefusedUnauthorized, "%s has already approved call %s (%d of %d approvals): a quorum needs distinct approvers",
			approver, p.CallID, len(p.ApprovedBy), p.need.Count)
	}
	return nil
}

// selfOf says why name may not decide in this run — they requested it, or
// (rules version 9) forked it or a fork it came from — or "".
func (r *run) selfOf(name string) string {
	switch {
	case name == "":
		return ""
	case name == r.RequestedBy:
		return name + " requested this run"
	case slices.Contains(r.ForkedBy, name):
		return name + " forked this run (or a fork it came from)"
	}
	return ""
}

func ruleSuffix(rule string) string {
	if rule == "" {
		return ""
	}
	return ", rule " + rule
}

// checkEdit checks edited arguments for p: the tool's schema, a digest the
// token signs, and — under a policy — the rules again, so an edit can never
// reach a deny rule or leave a quorum behind.
func (r *run) checkEdit(p *pending, raw []byte, d ruling) (*edit, error) {
	if !d.approve {
		return nil, refusal(RefusedEdit, "edited_args refused: only an approval can edit a call's arguments")
	}
	if p.Kind != KindGate {
		return nil, refusal(RefusedEdit, "edited_args refused: call %s is held by %s's own check, not at the gate; it can only be approved or rejected as it is", p.CallID, p.Tool)
	}
	c := tool.Call{ID: p.CallID, Tool: p.Tool, Args: raw}
	spec, err := r.check(&c)
	if err != nil {
		return nil, refusal(RefusedEdit, "edited_args refused: %s", clip(err.Error(), 500))
	}
	digest, _ := tool.Digest(c.Tool, c.Args)
	if digest == p.ArgsDigest {
		return nil, refusal(RefusedEdit, "edited_args are the call's own arguments: approve it without an edit")
	}
	orig := p.OriginalArgs
	if orig == nil {
		orig = p.CallArgs
	}
	if grow := len(c.Args) + len(orig) - len(p.CallArgs) - len(p.OriginalArgs); r.waitingBytes()+grow > MaxWaitingBytes {
		return nil, refusal(RefusedEdit, "edited_args refused: the calls waiting now would hold more than %d bytes of arguments, edits and answers", MaxWaitingBytes)
	}
	e := &edit{args: c.Args, digest: digest, verdict: policy.Verdict{Decide: policy.Ask, Need: policy.Approvers{Count: 1}}}
	if r.engine == nil {
		return e, nil
	}
	if d.editDigest == "" {
		return nil, refusal(RefusedUnauthorized, "%s's token approves the call's own arguments, not an edit: the token must sign the edited arguments' digest (edited_digest)", d.by)
	}
	if d.editDigest != digest {
		return nil, refusal(RefusedDigestMismatch, "%s's token signs edited arguments with digest %q; edited_args have %q", d.by, clip(d.editDigest, 64), digest)
	}
	e.verdict = r.evaluate(c.Tool, spec.Destructive, c.Args)
	switch e.verdict.Decide {
	case policy.Deny:
		return nil, refusal(RefusedEdit, "edit refused: rule %s denies %s %s", e.verdict.Rule, c.Tool, clip(string(c.Args), 300))
	case policy.Ask:
		if err := r.engine.Policy().Eligible(d.by, e.verdict.Need); err != nil {
			return nil, refusal(RefusedUnauthorized, "edit refused: the edited call%s needs other approvers: %s", ruleSuffix(e.verdict.Rule), clip(err.Error(), 300))
		}
	default: // allow: the editor's approval is enough
		e.verdict.Need = policy.Approvers{Count: 1}
	}
	if e.verdict.Need.Count < p.proposed.Count {
		// An edit never needs fewer approvals than the call as proposed: an
		// approver cannot edit a quorum call into one they approve alone.
		e.verdict.Decide, e.verdict.Need = policy.Ask, p.proposed
		if err := r.engine.Policy().Eligible(d.by, e.verdict.Need); err != nil {
			return nil, refusal(RefusedUnauthorized, "edit refused: the call as proposed needs %s, and so does any edit of it: %s", p.proposed.Describe(), clip(err.Error(), 300))
		}
	}
	return e, nil
}

// checkData checks an approver's answer to the tool's question: an approval
// of an interrupt, a JSON object within MaxArgsBytes, the one the token signs
// and the one earlier approvals of a quorum gave.
func (r *run) checkData(p *pending, raw []byte, d ruling) (json.RawMessage, error) {
	if !d.approve || p.Kind != KindInterrupt {
		return nil, refusal(RefusedDecision, "data refused: it answers a question the tool asked, so only an approval of an interrupt (kind \"interrupt\") carries it")
	}
	canon, err := tool.Canonical(raw)
	if err != nil || canon[0] != '{' {
		return nil, refusal(RefusedDecision, "data refused: want a JSON object")
	}
	if len(canon) > MaxArgsBytes {
		return nil, refusal(RefusedDecision, "data refused: %d bytes, at most %d", len(canon), MaxArgsBytes)
	}
	if r.engine != nil && d.dataDigest != sha256Hex(canon) {
		return nil, refusal(RefusedDigestMismatch, "%s's token signs data with digest %q, not this data's", d.by, clip(d.dataDigest, 64))
	}
	if r.waitingBytes()+len(canon)-len(p.data) > MaxWaitingBytes {
		return nil, refusal(RefusedDecision, "data refused: the calls waiting now would hold more than %d bytes of arguments, edits and answers", MaxWaitingBytes)
	}
	if p.data != nil && !bytes.Equal(p.data, canon) {
		return nil, refusal(RefusedDecision, "data refused: the earlier approvals of call %s gave other data; a quorum answers with one", p.CallID)
	}
	return canon, nil
}

// applyEdit puts an edit in place of p's arguments. Approvals given for the
// old arguments do not count for the new ones: the editor's is the first.
func (p *pending) applyEdit(e *edit, by string, withPolicy bool) {
	if p.OriginalArgs == nil {
		p.OriginalArgs = p.CallArgs
	}
	p.CallArgs, p.ArgsDigest, p.EditedBy = e.args, e.digest, by
	p.ApprovedBy, p.notes, p.tokens = nil, nil, nil
	if withPolicy {
		p.Rule = e.verdict.Rule
		p.setNeed(e.verdict.Need, true)
	}
}

// setNeed sets who may decide p (Count at least 1); shown tells whether
// operators see it (they do under a policy).
func (p *pending) setNeed(need policy.Approvers, shown bool) {
	need.Count = max(need.Count, 1)
	p.need = need
	if shown {
		n := need
		n.Roles = slices.Clone(need.Roles)
		p.Needs = &n
	}
}

// evaluate applies the policy's rules to a call, failing closed to the
// strictest verdict still possible.
func (r *run) evaluate(toolName string, destructive bool, args []byte) policy.Verdict {
	return r.engine.Evaluate(toolName, destructive, args, r.RequestedBy)
}
