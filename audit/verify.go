package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// verify checks one token: its signature with the policy's key for its
// approver, and that it is for this run, action and call.
func (a *auditor) verify(t pendingToken) {
	e := &a.rep.Entries[t.at]
	e.Problem = ""
	c, err := a.check(t)
	if c.Approver != "" {
		e.Approver = c.Approver
	}
	switch t.action {
	case signed.ActionStart, signed.ActionFork, signed.ActionGrant, signed.ActionRevoke, signed.ActionRewind:
	default:
		if e.Digest == "" {
			e.Digest = c.ArgsDigest
		}
		e.EditedDigest = c.EditedDigest
	}
	if c.Grant != nil {
		e.Tool = c.Grant.Tool
	}
	e.Channel = c.Via
	switch {
	case err != nil || !e.Applied || a.continued: // a continued run keeps the chain's requester (its carry)
	case t.action == signed.ActionFork && a.version >= versionTrust3:
		if !slices.Contains(a.forkers, c.Approver) {
			a.forkers = append(a.forkers, c.Approver) // the requester is the source's (the fork activity's result)
		}
	case t.action == signed.ActionStart || t.action == signed.ActionFork:
		a.reqBy = c.Approver
	}
	if err != nil {
		e.Problem = err.Error()
		return
	}
	e.Verified = true
	a.claims[t.at] = c
}

func (a *auditor) check(t pendingToken) (signed.Claims, error) {
	c, err := signed.Peek(t.token)
	if err != nil {
		return c, fmt.Errorf("malformed token: %v", err)
	}
	if a.pol == nil {
		return c, errors.New("no policy to verify against: the history records none (pass one)")
	}
	key, ok := a.pol.Key(c.Approver)
	if !ok {
		return c, fmt.Errorf("unknown approver %q: not an approver of the policy", c.Approver)
	}
	signer := c.Approver + "'s key"
	if c.Via != "" { // a decision by link: the link signer's, if the policy lets the approver decide so
		if c.Action != signed.ActionApprove && c.Action != signed.ActionReject {
			return c, fmt.Errorf("a token by link (via %s) signs %q: a decision by link may only approve or reject", c.Via, c.Action)
		}
		if c.EditedDigest != "" || c.DataDigest != "" || c.Grant != nil {
			return c, fmt.Errorf("a token by link (via %s) edits, answers or grants: a decision by link approves or rejects the call as it is", c.Via)
		}
		if err := a.pol.DecidesVia(c.Approver, c.Via); err != nil {
			return c, fmt.Errorf("decision by link refused: %v", err)
		}
		if key, ok = a.pol.ViaPublicKey(); !ok {
			return c, errors.New("decision by link: the policy's via_key does not parse")
		}
		signer = "the policy's via_key"
		if a.version >= versionTrust3 {
			if err := a.linkSent(c, a.rep.Entries[t.at].EventID); err != nil {
				return c, err
			}
		}
	}
	if _, err := signed.Verify(t.token, key); err != nil {
		return c, fmt.Errorf("bad signature: not signed with %s in the policy", signer)
	}
	switch {
	case a.rep.WorkflowID == "":
		return c, errors.New("the history does not name its workflow id, so the token's run (wid) cannot be checked")
	case c.WorkflowID != a.rep.WorkflowID:
		return c, fmt.Errorf("the token is for run %q, not this run (%q)", c.WorkflowID, a.rep.WorkflowID)
	case c.Action != t.action:
		return c, fmt.Errorf("the token signs %q but came as %q", c.Action, t.action)
	}
	if t.action == signed.ActionStart || t.action == signed.ActionFork {
		if err := a.checkStart(c, t.action); err != nil {
			return c, err
		}
	}
	if t.action == signed.ActionRewind || t.action == signed.ActionFork {
		// A rewind and a fork are an operator's acts.
		if err := a.pol.Operator(c.Approver); err != nil {
			return c, fmt.Errorf("not an operator's %s: %v", t.action, err)
		}
	}
	if n := t.note; n != nil && (c.CallID != n.CallID || c.Source != n.BaseRunID || c.Preview != n.Preview) {
		return c, fmt.Errorf("the token signs a rewind of run %s to %s from preview %s, not the note's (run %s to %s from preview %s)",
			c.Source, c.CallID, clipDigest(c.Preview), n.BaseRunID, n.CallID, clipDigest(n.Preview))
	}
	if n := t.note; n != nil && a.version >= versionTrust3 && (c.Reset == "" || c.Reset != n.Reset) {
		return c, fmt.Errorf("the token signs the rewind of reset %q, the note names reset %q: a rewind's token covers the one reset it names", c.Reset, n.Reset)
	}
	if in := t.in; in != nil {
		switch {
		case c.CallID != in.CallID:
			return c, fmt.Errorf("the token is for call %q, sent for %q", c.CallID, in.CallID)
		case in.Approver != "" && in.Approver != c.Approver:
			return c, fmt.Errorf("the payload names approver %q, the token %q", in.Approver, c.Approver)
		case in.ArgsDigest != "" && in.ArgsDigest != c.ArgsDigest:
			return c, fmt.Errorf("the payload's args_digest %q is not the one the token signs", in.ArgsDigest)
		case in.Kind != "" && c.Kind != "" && string(in.Kind) != c.Kind:
			return c, fmt.Errorf("the token answers kind %q, the payload %q", c.Kind, in.Kind)
		}
		if len(in.EditedArgs) > 0 {
			var spec tool.Spec
			if a.config != nil {
				for _, s := range a.config.Tools {
					if s.Name == a.callTool(in.CallID) {
						spec = s
					}
				}
			}
			if spec.Name != "" {
				if d, err := tool.Digest(spec.Name, in.EditedArgs); err != nil || d != c.EditedDigest {
					return c, errors.New("the edited arguments sent are not the ones the token signs (edited_digest)")
				}
			}
		}
	}
	return c, nil
}

// checkStart checks what a verified start token starts: the run's whole
// input (input_digest, rules version 5 and later) or its goal (goal_digest,
// as runs of version 4 and older checked it). A continued run's input is its
// predecessor's with the carry added, re-encoded: the chain's first run
// checked the input_digest (its history holds the proof), so here only the
// goal, which continue-as-new keeps, is checked. A fork (rules version 7)
// is always checked by its input_digest.
func (a *auditor) checkStart(c signed.Claims, action string) error {
	if (a.version >= versionTrust2 || action == signed.ActionFork) && !a.continued {
		d, err := workflows.InputDigest(a.input)
		switch {
		case err != nil:
			return fmt.Errorf("the run's input cannot be digested: %v", err)
		case c.InputDigest == "":
			return fmt.Errorf("the token signs no input_digest: a run of rules version %d starts only with a token over its whole input", a.version)
		case c.InputDigest != d:
			return fmt.Errorf("the token signs another input: its input_digest %s is not this run's input's (%s, request_token left out)", clipDigest(c.InputDigest), clipDigest(d))
		}
		return nil
	}
	if a.continued && c.GoalDigest == "" {
		return nil
	}
	if c.GoalDigest != workflows.GoalDigest(a.goal) {
		return errors.New("the token signs another goal (goal_digest is not the SHA-256 of this run's goal)")
	}
	return nil
}

// clipDigest is a digest as a message shows it: its first 12 characters.
func clipDigest(d string) string {
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

// callTool is the tool of a call, from its activity or the trace; "" if
// unknown.
func (a *auditor) callTool(callID string) string {
	for _, rc := range a.ran {
		if rc.req.CallID == callID && callID != "" {
			return rc.tool
		}
	}
	if a.runRes == nil || callID == "" {
		return ""
	}
	for _, r := range a.runRes.Trace {
		if r.CallID == callID {
			return r.Tool
		}
	}
	return ""
}

// decodePayload decodes the first of the payloads, JSON, into v.
func decodePayload(p *commonpb.Payloads, v any) error {
	ps := p.GetPayloads()
	if len(ps) == 0 {
		return errors.New("no payload")
	}
	if enc := string(ps[0].GetMetadata()["encoding"]); enc != "json/plain" {
		return fmt.Errorf("payload encoding %q, want json/plain", enc)
	}
	return json.Unmarshal(ps[0].GetData(), v)
}

// peekApprover is the approver a token claims to be from, unverified; "" if
// it does not decode.
func peekApprover(token string) string {
	c, _ := signed.Peek(token)
	return c.Approver
}
