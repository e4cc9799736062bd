package workflows_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// testPolicy is the policy over the fixture desk's tools.
const testPolicy = `
approvers:
  alice: {key: "%s", roles: [support]}
  bob:   {key: "%s", roles: [finance]}
  carol: {key: "%s", roles: [finance]}
tools:
  close_ticket:
    approvers: {roles: [support]}
  refund:
    rules:
      - {id: shadow-mid, when: "args.amount_cents > 8000", decide: allow, shadow: true}
      - {id: small-refunds, when: "args.amount_cents <= 5000", decide: allow}
      - {id: large-refunds, when: "args.amount_cents > 50000", decide: ask, approvers: {roles: [finance], count: 2}}
      - {id: no-test-refunds, when: "has(args.reason) && args.reason.contains('test')", decide: deny}
    approvers: {roles: [finance]}
`

// signers holds the approvers' private keys and the policy that names them.
type signers struct {
	t      *testing.T
	keys   map[string]ed25519.PrivateKey
	policy *policy.Policy
}

func newSigners(t *testing.T) *signers {
	s := &signers{t: t, keys: map[string]ed25519.PrivateKey{}}
	var pubs []any
	for _, name := range []string{"alice", "bob", "carol", "mallory"} {
		pub, priv, err := signed.GenerateKey()
		require.NoError(t, err)
		s.keys[name] = priv
		pubs = append(pubs, signed.FormatPublicKey(pub))
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(testPolicy, pubs[:3]...)))
	require.NoError(t, err)
	s.policy = p
	return s
}

// token signs c as name, for the fixture's run, valid for ten minutes from
// the workflow's clock (fields c sets win).
func (s *signers) token(f *fixture, name string, c signed.Claims) string {
	s.t.Helper()
	c.Approver = name
	if c.WorkflowID == "" {
		c.WorkflowID = "default-test-workflow-id"
	}
	if c.IssuedAt == 0 {
		c.IssuedAt = f.env.Now().Unix()
	}
	if c.Expiry == 0 {
		c.Expiry = c.IssuedAt + 600
	}
	tok, err := signed.Sign(s.keys[name], c)
	require.NoError(s.t, err)
	return tok
}

// decide sends name's signed decision on callID as an update, for the
// arguments state shows.
func (s *signers) decide(f *fixture, name, action, callID string, edit func(*signed.Claims, *workflows.DecisionInput)) *updateOutcome {
	digest, asked := f.digest(callID), f.asked(callID)
	c := signed.Claims{Action: action, CallID: callID, ArgsDigest: digest, Asked: asked, Note: "ok by " + name}
	if action == signed.ActionReject {
		c.Note, c.Reason = "", "no, says "+name
	}
	in := workflows.DecisionInput{CallID: callID, ArgsDigest: digest}
	if edit != nil {
		edit(&c, &in)
	}
	in.Token = s.token(f, name, c)
	return f.update(action, in)
}

func withPolicy(p *policy.Policy) fixtureOption { return func(o *worker.Options) { o.Policy = p } }

func refundCall(cents int, extra string) tool.Proposal {
	return call("refund", fmt.Sprintf(`{"booking_id":"BK-1","amount_cents":%d%s}`, cents, extra))
}

// The rules decide: a small refund runs by rule, a test refund is denied and
// the planner is told which rule, a mid refund waits for one of finance (a
// shadow rule recorded on the way), and a large one for two.
func TestPolicyRulesDecide(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var bob, carol *updateOutcome
	f.at(time.Minute, func() {
		st := f.state()
		require.True(t, st.Policy)
		require.Equal(t, []string{"gate:refund"}, f.next())
		require.Equal(t, "", st.Interrupts[0].Rule, "9,000 matches no rule: the tool's approvers")
		require.Equal(t, &policy.Approvers{Roles: []string{"finance"}, Count: 1}, st.Interrupts[0].Needs)
		bob = s.decide(f, "bob", signed.ActionApprove, "c-3", nil)
	})
	f.at(2*time.Minute, func() {
		require.Equal(t, []string{"gate:refund (0 of 2 approvals)"}, f.next())
		require.Equal(t, "large-refunds", f.state().Interrupts[0].Rule)
		bob = s.decide(f, "bob", signed.ActionApprove, "c-4", nil)
	})
	f.at(3*time.Minute, func() {
		require.Equal(t, workflows.DecisionCounted, bob.result.Decision)
		require.Equal(t, []string{"gate:refund (1 of 2 approvals: bob)"}, f.next())
		require.Equal(t, []string{"bob"}, f.state().Interrupts[0].ApprovedBy)
		require.Len(t, f.desk.payments, 2, "c-1 by rule and c-3 by bob; one approval of two runs nothing")
		carol = s.decide(f, "carol", signed.ActionApprove, "c-4", nil)
	})
	res := f.run(scripted(steps(
		refundCall(3000, ""),
		refundCall(9000, `,"reason":"a test"`),
		refundCall(9000, ""),
	), steps(refundCall(60000, ""))))
	require.NoError(t, carol.err)
	require.Equal(t, workflows.TraceApproved, carol.result.Decision)
	require.Equal(t, []string{"bob", "carol"}, carol.result.ApprovedBy)
	require.Len(t, f.desk.payments, 3)

	byCall := map[string][]workflows.TraceRecord{}
	for _, rec := range res.Trace {
		byCall[rec.CallID] = append(byCall[rec.CallID], rec)
	}
	require.Equal(t, "rule:small-refunds", byCall["c-1"][0].Approver)
	require.Equal(t, "small-refunds", byCall["c-1"][0].Rule)
	require.Equal(t, workflows.TraceOK, byCall["c-1"][1].Status)

	require.Equal(t, workflows.TraceShadow, byCall["c-2"][0].Status, "shadow-mid holds for 9,000: recorded, not enforced")
	require.Equal(t, workflows.TraceBlocked, byCall["c-2"][1].Status)
	require.Equal(t, "no-test-refunds", byCall["c-2"][1].Rule)
	require.Contains(t, byCall["c-2"][1].Error, "denied by rule no-test-refunds")

	require.Equal(t, []string{"shadow", "blocked", "approved", "ok"}, traceStatuses(byCall["c-3"]))
	require.Equal(t, "bob", byCall["c-3"][2].Approver)
	require.Equal(t, "ok by bob", byCall["c-3"][2].Reason)
	require.Equal(t, "bob, carol", byCall["c-4"][2].Approver)
	require.Equal(t, "large-refunds", byCall["c-4"][2].Rule)
}

func traceStatuses(recs []workflows.TraceRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Status
	}
	return out
}

// Every decision that is not proven to come from an approver who may make
// it, for this call and these arguments, is refused, and says why.
func TestSignedDecisionRefusals(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	cases := map[string]*updateOutcome{}
	var good *updateOutcome
	f.at(time.Minute, func() {
		digest := f.digest("c-1")
		require.NotEmpty(t, digest)
		cases["unsigned"] = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "bob", ArgsDigest: digest})
		cases["unknown approver"] = s.decide(f, "mallory", signed.ActionApprove, "c-1", nil)
		cases["wrong role"] = s.decide(f, "alice", signed.ActionApprove, "c-1", nil)
		cases["expired"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) {
			c.IssuedAt, c.Expiry = f.env.Now().Add(-time.Hour).Unix(), f.env.Now().Add(-time.Minute).Unix()
		})
		cases["future"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) {
			c.IssuedAt, c.Expiry = f.env.Now().Add(time.Hour).Unix(), f.env.Now().Add(2*time.Hour).Unix()
		})
		cases["another call"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) { c.CallID = "c-2" })
		cases["another run"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) { c.WorkflowID = "other-run" })
		cases["digest mismatch"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) {
			c.ArgsDigest = strings.Repeat("0", 64)
		})
		cases["payload digest"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(_ *signed.Claims, in *workflows.DecisionInput) {
			in.ArgsDigest = strings.Repeat("1", 64)
		})
		cases["reject token as approve"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) { c.Action = signed.ActionReject })
		cases["interrupt token at the gate"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) { c.Kind = "interrupt" })
		cases["an earlier question"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, _ *workflows.DecisionInput) { c.Asked-- })
		cases["approver renamed"] = s.decide(f, "bob", signed.ActionApprove, "c-1", func(_ *signed.Claims, in *workflows.DecisionInput) { in.Approver = "carol" })
		// As signals: an unsigned approval and alice's are refused into state.refused.
		f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: "c-1", Approver: "bob", ArgsDigest: digest})
		f.env.SignalWorkflow(workflows.SignalApprove, workflows.DecisionInput{CallID: "c-1", ArgsDigest: digest,
			Token: s.token(f, "alice", signed.Claims{Action: signed.ActionApprove, CallID: "c-1", ArgsDigest: digest, Asked: f.asked("c-1")})})
	})
	f.at(2*time.Minute, func() {
		// "bad signature": bob's claims signed with mallory's key.
		c := signed.Claims{Action: signed.ActionApprove, CallID: "c-1", ArgsDigest: f.digest("c-1"), Asked: f.asked("c-1")}
		tok := s.token(f, "mallory", c)
		forged := strings.Replace(tok, strings.Split(tok, ".")[1], strings.Split(s.token(f, "bob", c), ".")[1], 1)
		cases["bad signature"] = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", ArgsDigest: f.digest("c-1"), Token: forged})
	})
	f.at(3*time.Minute, func() {
		want := map[string]string{
			"unsigned":                    "unsigned",
			"unknown approver":            `unknown approver "mallory"`,
			"bad signature":               "bad signature",
			"wrong role":                  "wrong role",
			"expired":                     "expired",
			"future":                      "not yet valid",
			"another call":                `is for call "c-2"`,
			"another run":                 `is for run "other-run"`,
			"digest mismatch":             "args_digest",
			"payload digest":              "is not the one bob's token signs",
			"reject token as approve":     `signs "reject", not "approve"`,
			"approver renamed":            `approver "carol" is not the token's`,
			"interrupt token at the gate": `answers kind "interrupt"`,
			"an earlier question":         "answers the question asked at",
		}
		for name, out := range cases {
			require.True(t, out.done, name)
			require.ErrorContains(t, out.err, want[name], name)
		}
		st := f.state()
		require.Equal(t, workflows.StatusWaitingForApproval, st.Status)
		require.Len(t, st.Refused, 2)
		require.Contains(t, st.Refused[0].Error, "unsigned")
		require.Contains(t, st.Refused[1].Error, "wrong role")
		require.Empty(t, f.desk.payments)
		good = s.decide(f, "bob", signed.ActionReject, "c-1", nil)
	})
	res := f.run(scripted(steps(refundCall(9000, ""))))
	require.NoError(t, good.err)
	last := res.Trace[len(res.Trace)-1]
	require.Equal(t, workflows.TraceRejected, last.Status)
	require.Equal(t, "bob", last.Approver)
	require.Equal(t, "no, says bob", last.Reason)
	require.Empty(t, f.desk.payments)
}

// A quorum needs distinct approvers, the requester may approve none of the
// run's calls, and one rejection is enough.
func TestQuorumAndSelfApproval(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var twice, self, no *updateOutcome
	f.at(time.Minute, func() { s.decide(f, "bob", signed.ActionApprove, "c-1", nil) })
	f.at(2*time.Minute, func() {
		twice = s.decide(f, "bob", signed.ActionApprove, "c-1", nil)
		self = s.decide(f, "carol", signed.ActionApprove, "c-1", nil) // carol requested this run
	})
	f.at(3*time.Minute, func() {
		require.ErrorContains(t, twice.err, "bob has already approved call c-1 (1 of 2 approvals)")
		require.ErrorContains(t, self.err, "self-approval refused: carol requested this run")
		no = s.decide(f, "bob", signed.ActionReject, "c-1", nil) // bob approved; his "no" still decides
	})
	in := scripted(steps(refundCall(60000, "")))
	s.signStart(f, "carol", &in, signed.Claims{})
	res := f.run(in)
	require.NoError(t, no.err)
	require.Equal(t, "carol", f.state().RequestedBy)
	require.Equal(t, workflows.TraceRejected, res.Trace[len(res.Trace)-1].Status)
	require.Empty(t, f.desk.payments)
}

// signStart signs in as requested by name: a start token over the digest
// of the whole input (fields c sets win).
func (s *signers) signStart(f *fixture, name string, in *workflows.RunInput, c signed.Claims) {
	s.t.Helper()
	raw, err := json.Marshal(in)
	require.NoError(s.t, err)
	if c.Action == "" {
		c.Action = signed.ActionStart
	}
	if c.InputDigest == "" {
		c.InputDigest, err = workflows.InputDigest(raw)
		require.NoError(s.t, err)
	}
	in.RequestToken = s.token(f, name, c)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A signed start that does not verify fails the run before anything runs.
func TestRequestTokenRefusals(t *testing.T) {
	s := newSigners(t)
	for name, tc := range map[string]struct {
		claims signed.Claims
		signer string
		want   string
	}{
		// A start token signs the whole input (issue 20, item 7): the goal alone no longer does.
		"another input":         {signed.Claims{InputDigest: sha256Hex("something else")}, "bob", `bob's token signs another input: its input_digest "`},
		"the goal only":         {signed.Claims{InputDigest: "-", GoalDigest: sha256Hex("find the login ticket and close it")}, "bob", "signs another input"},
		"not a start":           {signed.Claims{Action: signed.ActionApprove}, "bob", `signs "approve", not "start"`},
		"unknown signer":        {signed.Claims{}, "mallory", "unknown approver"},
		"valid for too long":    {signed.Claims{Expiry: 1, IssuedAt: 1}, "bob", "longer than the 1h0m0s this worker's policy allows"},
		"another run":           {signed.Claims{WorkflowID: "other-run"}, "bob", `bob's token is for run "other-run"`},
		"signed by another key": {signed.Claims{}, "forger", "bad signature: the token is not signed by bob's key"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, withPolicy(s.policy))
			in := scripted(steps(refundCall(3000, "")))
			if tc.claims.InputDigest == "-" {
				tc.claims.InputDigest = ""
				in.RequestToken = s.token(f, tc.signer, signed.Claims{Action: signed.ActionStart, GoalDigest: tc.claims.GoalDigest})
			} else {
				if tc.claims.Expiry == 1 { // two hours of validity
					tc.claims.IssuedAt, tc.claims.Expiry = f.env.Now().Unix(), f.env.Now().Add(2*time.Hour).Unix()
				}
				signer := tc.signer
				if signer == "forger" { // mallory's key, bob's name
					signer = "bob"
					s.keys["bob"], s.keys["mallory"] = s.keys["mallory"], s.keys["bob"]
					defer func() { s.keys["bob"], s.keys["mallory"] = s.keys["mallory"], s.keys["bob"] }()
				}
				s.signStart(f, signer, &in, tc.claims)
			}
			f.env.ExecuteWorkflow(workflows.WorkflowName, in)
			requireInvalidInput(t, f, "request_token refused: ")
			require.ErrorContains(t, f.env.GetWorkflowError(), tc.want)
			require.Zero(t, f.desk.count("refund"))
		})
	}
	t.Run("no policy", func(t *testing.T) {
		f := newFixture(t)
		in := scripted(steps(refundCall(3000, "")))
		in.RequestToken = "x.y.z"
		f.env.ExecuteWorkflow(workflows.WorkflowName, in)
		require.ErrorContains(t, f.env.GetWorkflowError(), "no policy")
	})
	t.Run("a policy that requires signed starts refuses an unsigned one", func(t *testing.T) {
		p := *s.policy
		p.RequireSignedStart = true
		f := newFixture(t, withPolicy(&p))
		f.env.ExecuteWorkflow(workflows.WorkflowName, scripted(steps(refundCall(3000, ""))))
		requireInvalidInput(t, f, "request_token required: this worker's policy takes only signed starts (require_signed_start)")
		require.Zero(t, f.desk.count("refund"))
	})
	t.Run("a policy's max_token_lifetime lowers the bound", func(t *testing.T) {
		p := *s.policy
		p.MaxTokenLifetime = "5m"
		f := newFixture(t, withPolicy(&p))
		in := scripted(steps(refundCall(3000, "")))
		s.signStart(f, "bob", &in, signed.Claims{}) // ten minutes
		f.env.ExecuteWorkflow(workflows.WorkflowName, in)
		requireInvalidInput(t, f, "bob's token refused: it is valid for 10m0s (iat to exp), longer than the 5m0s this worker's policy allows")
	})
}

// An edit is schema-checked, re-digested and re-evaluated: one a deny rule
// catches is refused; one that lands in quorum territory waits for a second
// approver; the call runs with the edited arguments, the trace keeps the
// original, and the planner is told.
func TestEditThenApprove(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	editTo := func(args string) func(*signed.Claims, *workflows.DecisionInput) {
		return func(c *signed.Claims, in *workflows.DecisionInput) {
			in.EditedArgs = []byte(args)
			c.EditedDigest, _ = tool.Digest("refund", []byte(args))
		}
	}
	var denied, unsigned, unsent, swapped, badSchema, edit, second *updateOutcome
	f.at(time.Minute, func() {
		denied = s.decide(f, "bob", signed.ActionApprove, "c-1", editTo(`{"booking_id":"BK-1","amount_cents":7000,"reason":"test it"}`))
		unsigned = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) {
			in.EditedArgs = []byte(`{"booking_id":"BK-1","amount_cents":7000}`)
		})
		unsent = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) {
			c.EditedDigest, _ = tool.Digest("refund", []byte(`{"booking_id":"BK-1","amount_cents":7000}`))
		})
		swapped = s.decide(f, "bob", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) {
			in.EditedArgs = []byte(`{"booking_id":"BK-1","amount_cents":70000}`)
			c.EditedDigest, _ = tool.Digest("refund", []byte(`{"booking_id":"BK-1","amount_cents":7000}`))
		})
		badSchema = s.decide(f, "bob", signed.ActionApprove, "c-1", editTo(`["not an object"]`))
		edit = s.decide(f, "bob", signed.ActionApprove, "c-1", editTo(`{"amount_cents":70000,"booking_id":"BK-1"}`))
	})
	f.at(2*time.Minute, func() {
		require.ErrorContains(t, denied.err, "edit refused: rule no-test-refunds denies refund")
		require.ErrorContains(t, unsigned.err, "approves the call's own arguments, not an edit")
		require.ErrorContains(t, unsent.err, "send them as edited_args")
		require.ErrorContains(t, swapped.err, "token signs edited arguments with digest")
		require.ErrorContains(t, badSchema.err, "edited_args refused")
		require.NoError(t, edit.err)
		require.Equal(t, workflows.DecisionCounted, edit.result.Decision, "70,000 needs two of finance")
		it := f.state().Interrupts[0]
		require.Equal(t, "large-refunds", it.Rule)
		require.JSONEq(t, `{"booking_id":"BK-1","amount_cents":9000}`, string(it.OriginalArgs))
		require.JSONEq(t, `{"booking_id":"BK-1","amount_cents":70000}`, string(it.CallArgs))
		require.Equal(t, "bob", it.EditedBy)
		second = s.decide(f, "carol", signed.ActionApprove, "c-1", nil) // for the digest state shows now
	})
	res := f.run(scripted(steps(refundCall(9000, ""))))
	require.NoError(t, second.err)
	require.Equal(t, workflows.TraceApproved, second.result.Decision)
	require.Len(t, f.desk.payments, 1)
	for _, p := range f.desk.payments {
		require.Contains(t, string(p), `"amount_cents":70000`, "the call ran with the edited arguments")
	}
	var approved workflows.TraceRecord
	for _, rec := range res.Trace {
		require.NotEqual(t, workflows.TraceApproved, rec.Status, "an edit is recorded as edited, not approved")
		if rec.Status == workflows.TraceEdited {
			approved = rec
		}
	}
	require.JSONEq(t, `{"booking_id":"BK-1","amount_cents":9000}`, string(approved.OriginalArgs))
	require.JSONEq(t, `{"booking_id":"BK-1","amount_cents":70000}`, string(approved.Args))
	require.Equal(t, "bob, carol", approved.Approver)
}

// grantOutcome is the outcome of a grant or revoke.
type grantOutcome = outcome[workflows.GrantResult]

func (f *fixture) grantUpdate(name string, tok string) *grantOutcome {
	return sendUpdate[workflows.GrantResult](f, name, workflows.TokenInput{Token: tok})
}

// A grant lets the next matching calls through for its uses and no more,
// never a call that needs a quorum; one from a wrong role is refused; a
// revoke by a peer of the granter ends it, one by anyone else is refused.
func TestGrants(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var wrongRole, good, revoke, alienRevoke *grantOutcome
	f.at(time.Minute, func() {
		g := &signed.Grant{Tool: "refund", When: "args.amount_cents < 100000", Uses: 3}
		wrongRole = f.grantUpdate(workflows.UpdateGrant, s.token(f, "alice", signed.Claims{Action: signed.ActionGrant, Grant: g}))
		good = f.grantUpdate(workflows.UpdateGrant, s.token(f, "bob", signed.Claims{Action: signed.ActionGrant, Grant: g}))
	})
	f.at(2*time.Minute, func() {
		require.ErrorContains(t, wrongRole.err, "wrong role to grant refund")
		require.NoError(t, good.err)
		require.Equal(t, "g-1", good.result.Grant.ID)
		s.decide(f, "carol", signed.ActionApprove, "c-1", nil)
	})
	f.at(3*time.Minute, func() {
		// c-2 and c-3 passed by the grant; c-4 (60,000) needs a quorum, which no grant answers.
		st := f.state()
		require.Equal(t, 2, st.Grants[0].Used)
		require.Equal(t, []string{"c-4"}, interruptIDs(st))
		alienRevoke = f.grantUpdate(workflows.UpdateRevoke, s.token(f, "alice", signed.Claims{Action: signed.ActionRevoke, GrantID: "g-1"}))
		s.decide(f, "bob", signed.ActionReject, "c-4", nil)
	})
	f.at(4*time.Minute, func() {
		// c-5 took the last use; c-6 finds it used up.
		require.ErrorContains(t, alienRevoke.err, "only they or an approver who shares a role")
		require.Equal(t, []string{"c-6"}, interruptIDs(f.state()), "a grant used up lets nothing through")
		revoke = f.grantUpdate(workflows.UpdateRevoke, s.token(f, "carol", signed.Claims{Action: signed.ActionRevoke, GrantID: "g-1"}))
		s.decide(f, "bob", signed.ActionReject, "c-6", nil)
	})
	res := f.run(scripted(
		steps(refundCall(9000, "")),
		steps(refundCall(9001, "")),
		steps(refundCall(9002, "")),
		steps(refundCall(60000, "")),
		steps(refundCall(9003, "")),
		steps(refundCall(9004, "")),
	))
	require.NoError(t, revoke.err)
	require.Equal(t, "carol", f.state().Grants[0].RevokedBy)
	var granted []string
	for _, rec := range res.Trace {
		if rec.Status == workflows.TraceApproved && strings.HasPrefix(rec.Approver, "grant:") {
			granted = append(granted, rec.CallID+" "+rec.Approver+" "+rec.Reason)
		}
	}
	require.Equal(t, []string{"c-2 grant:bob grant g-1, use 1 of 3", "c-3 grant:bob grant g-1, use 2 of 3", "c-5 grant:bob grant g-1, use 3 of 3"}, granted)
	require.Len(t, f.desk.payments, 4, "c-1 by carol, c-2, c-3 and c-5 by the grant")
}

func interruptIDs(s workflows.State) []string {
	var out []string
	for _, it := range s.Interrupts {
		out = append(out, it.CallID)
	}
	return out
}

// Approvals given for the proposed arguments do not count for edited ones:
// after an edit the quorum starts again with the editor.
func TestEditRestartsTheQuorum(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var edit, again *updateOutcome
	f.at(time.Minute, func() { s.decide(f, "bob", signed.ActionApprove, "c-1", nil) })
	f.at(2*time.Minute, func() {
		args := `{"booking_id":"BK-1","amount_cents":70000}`
		edit = s.decide(f, "carol", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) {
			in.EditedArgs = []byte(args)
			c.EditedDigest, _ = tool.Digest("refund", []byte(args))
		})
	})
	f.at(3*time.Minute, func() {
		require.NoError(t, edit.err)
		require.Equal(t, workflows.DecisionCounted, edit.result.Decision, "bob approved 60,000, not 70,000")
		require.Equal(t, []string{"carol"}, f.state().Interrupts[0].ApprovedBy)
		require.Empty(t, f.desk.payments)
		again = s.decide(f, "bob", signed.ActionApprove, "c-1", nil)
	})
	f.run(scripted(steps(refundCall(60000, ""))))
	require.NoError(t, again.err)
	require.Equal(t, workflows.TraceApproved, again.result.Decision)
	for _, p := range f.desk.payments {
		require.Contains(t, string(p), `"amount_cents":70000`)
	}
	require.Len(t, f.desk.payments, 1)
}

// An approval of a tool's own question may answer it with data (an MCP
// server's elicitation): the tool sees it with the approval. Data is refused
// at the gate, when it is not an object, and under a policy when the token
// does not sign it.
func TestInterruptAnsweredWithData(t *testing.T) {
	s := newSigners(t)
	s.policy.Tools["book_hotel"] = policy.Tool{Approvers: &policy.Approvers{Roles: []string{"support"}}}
	f := newFixture(t, withPolicy(s.policy))
	answer := `{"room":"12","reason":"checked the guest"}`
	withData := func(data string, signedData string) func(*signed.Claims, *workflows.DecisionInput) {
		return func(c *signed.Claims, in *workflows.DecisionInput) {
			in.Kind, c.Kind = workflows.KindInterrupt, string(workflows.KindInterrupt)
			in.Data = []byte(data)
			canon, _ := tool.Canonical([]byte(signedData))
			c.DataDigest = sha256Hex(string(canon))
		}
	}
	var atGate, notObject, unsignedData, good *updateOutcome
	f.at(time.Minute, func() {
		atGate = s.decide(f, "alice", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) { in.Data = []byte(answer) })
	})
	f.at(2*time.Minute, func() {
		require.ErrorContains(t, atGate.err, "only an approval of an interrupt")
		s.decide(f, "alice", signed.ActionApprove, "c-1", nil) // the gate, plainly
	})
	f.at(3*time.Minute, func() {
		require.Equal(t, []string{"interrupt:book_hotel"}, f.next())
		notObject = s.decide(f, "alice", signed.ActionApprove, "c-1", withData(`["room 12"]`, `["room 12"]`))
		unsignedData = s.decide(f, "alice", signed.ActionApprove, "c-1", withData(answer, `{"room":"13"}`))
		good = s.decide(f, "alice", signed.ActionApprove, "c-1", withData(answer, answer))
	})
	f.run(scripted(steps(call("book_hotel", `{"guest":"Robert'); DROP TABLE bookings;--"}`))))
	require.ErrorContains(t, notObject.err, "want a JSON object")
	require.ErrorContains(t, unsignedData.err, "signs data with digest")
	require.NoError(t, good.err)
	require.Len(t, f.desk.approvals, 2)
	require.Equal(t, tool.ApprovedInterrupt, f.desk.approvals[1].Kind)
	require.JSONEq(t, answer, string(f.desk.approvals[1].Data), "the re-run sees the approver's answer")
	require.Len(t, f.desk.bookings, 1)
}

// A rule that cannot be evaluated never lowers the bar (issue 20, item 2):
// with goodwill's `args.reason == 'goodwill'` failing on a refund without a
// reason, a 60,000 refund still needs two of finance, a grant does not
// answer a verdict reached by failing closed, and an edit never needs fewer
// approvals than the call as proposed.
func TestFailingRuleNeverLowersTheBar(t *testing.T) {
	s := newSigners(t)
	refund := s.policy.Tools["refund"]
	refund.Rules = append([]policy.Rule{{ID: "goodwill", When: "args.reason == 'goodwill'", Decide: policy.Allow}}, refund.Rules...)
	s.policy.Tools["refund"] = refund
	f := newFixture(t, withPolicy(s.policy))
	editTo := func(args string) func(*signed.Claims, *workflows.DecisionInput) {
		return func(c *signed.Claims, in *workflows.DecisionInput) {
			in.EditedArgs = []byte(args)
			c.EditedDigest, _ = tool.Digest("refund", []byte(args))
		}
	}
	var grant *grantOutcome
	var first, down, out *updateOutcome
	f.at(time.Minute, func() {
		it := f.state().Interrupts[0]
		require.Equal(t, "large-refunds", it.Rule)
		require.Equal(t, 2, it.Needs.Count, "60,000 with no reason: goodwill could not be evaluated, large-refunds asks two")
		grant = f.grantUpdate(workflows.UpdateGrant, s.token(f, "bob", signed.Claims{Action: signed.ActionGrant, Grant: &signed.Grant{Tool: "refund"}}))
		first = s.decide(f, "bob", signed.ActionApprove, "c-1", nil)
	})
	f.at(2*time.Minute, func() {
		require.NoError(t, grant.err)
		require.Equal(t, workflows.DecisionCounted, first.result.Decision)
		s.decide(f, "carol", signed.ActionApprove, "c-1", nil)
	})
	f.at(3*time.Minute, func() {
		// c-2, 22,000 with no reason: the verdict was reached by failing
		// closed, so bob's grant (no when) does not let it through.
		st := f.state()
		require.Equal(t, []string{"c-2"}, interruptIDs(st))
		require.Zero(t, st.Grants[0].Used)
		require.Contains(t, st.Interrupts[0].Reason, "rule goodwill could not be evaluated")
		s.decide(f, "carol", signed.ActionReject, "c-2", nil)
	})
	f.at(4*time.Minute, func() {
		// c-3, 60,000 for "broken": two of finance. An edit down to 4,000
		// (small-refunds would allow it) still needs two.
		require.Equal(t, []string{"c-3"}, interruptIDs(f.state()))
		down = s.decide(f, "bob", signed.ActionApprove, "c-3", editTo(`{"booking_id":"BK-1","amount_cents":4000,"reason":"broken"}`))
	})
	f.at(5*time.Minute, func() {
		require.NoError(t, down.err)
		require.Equal(t, workflows.DecisionCounted, down.result.Decision, "the call as proposed needed two")
		require.Equal(t, 2, down.result.Needed)
		s.decide(f, "carol", signed.ActionReject, "c-3", nil)
	})
	f.at(6*time.Minute, func() {
		// c-4, 60,000: editing the amount out does not leave a one-approver call.
		out = s.decide(f, "bob", signed.ActionApprove, "c-4", editTo(`{"booking_id":"BK-1","reason":"broken"}`))
	})
	f.at(7*time.Minute, func() {
		require.NoError(t, out.err)
		require.Equal(t, workflows.DecisionCounted, out.result.Decision)
		require.Equal(t, 2, out.result.Needed)
		s.decide(f, "carol", signed.ActionReject, "c-4", nil)
	})
	f.run(scripted(
		steps(refundCall(60000, "")),
		steps(refundCall(22000, "")),
		steps(refundCall(60000, `,"reason":"broken"`)),
		steps(refundCall(60000, `,"reason":"broken"`)),
	))
	require.Len(t, f.desk.payments, 1, "only c-1, on two approvals")
}
