package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Every token is taken at most once per run chain (issue 20, item 3): a
// grant token read from the history and sent again makes no second grant,
// not even after the first was revoked; a revoke or a decision sent again is
// refused as a replay.
func TestTokensAreTakenOnce(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	g := &signed.Grant{Tool: "refund", When: "args.amount_cents < 10000", Uses: 1}
	var grantTok, revokeTok string
	var sent *workflows.DecisionInput
	var grant, grantAgain, revoke, revokeAgain, grantAfterRevoke *grantOutcome
	var approve, approveAgain *updateOutcome
	f.at(time.Minute, func() {
		grantTok = s.token(f, "bob", signed.Claims{Action: signed.ActionGrant, Grant: g})
		grant = f.grantUpdate(workflows.UpdateGrant, grantTok)
	})
	f.at(2*time.Minute, func() {
		require.NoError(t, grant.err)
		grantAgain = f.grantUpdate(workflows.UpdateGrant, grantTok)
	})
	f.at(3*time.Minute, func() {
		require.ErrorContains(t, grantAgain.err, "bob's token was taken already in this run chain")
		revokeTok = s.token(f, "carol", signed.Claims{Action: signed.ActionRevoke, GrantID: "g-1"})
		revoke = f.grantUpdate(workflows.UpdateRevoke, revokeTok)
	})
	f.at(4*time.Minute, func() {
		require.NoError(t, revoke.err)
		revokeAgain = f.grantUpdate(workflows.UpdateRevoke, revokeTok)
		grantAfterRevoke = f.grantUpdate(workflows.UpdateGrant, grantTok)
	})
	f.at(5*time.Minute, func() {
		require.ErrorContains(t, revokeAgain.err, "carol's token was taken already")
		require.ErrorContains(t, grantAfterRevoke.err, "bob's token was taken already")
		st := f.state()
		require.Len(t, st.Grants, 1, "one grant token, one grant")
		require.Equal(t, "carol", st.Grants[0].RevokedBy)
		// c-1 needs two of finance: bob's approval counts once, and his
		// token sent again is a replay.
		approve = s.decide(f, "bob", signed.ActionApprove, "c-1", func(_ *signed.Claims, in *workflows.DecisionInput) { sent = in })
	})
	f.at(6*time.Minute, func() {
		require.NoError(t, approve.err)
		require.Equal(t, workflows.DecisionCounted, approve.result.Decision)
		approveAgain = f.update(signed.ActionApprove, *sent)
	})
	f.at(7*time.Minute, func() {
		require.ErrorContains(t, approveAgain.err, "bob's token was taken already")
		s.decide(f, "carol", signed.ActionReject, "c-1", nil)
	})
	f.run(scripted(steps(refundCall(60000, ""))))
	require.Empty(t, f.desk.payments)
}

// The tokens a run chain has taken are carried across continue-as-new: the
// next run refuses a token its predecessor took.
func TestTakenTokensAreCarried(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	g := &signed.Grant{Tool: "refund", When: "args.amount_cents < 10000", Uses: 1}
	var grantTok string
	var grant, replay *grantOutcome
	in := scripted(steps(refundCall(60000, "")), steps(refundCall(70000, "")))
	in.HistoryLimit = 500
	res, inputs := runToEnd(t, f, in, func(run int, f *fixture) {
		f.env.SetCurrentHistoryLength(500 + run)
		switch run {
		case 0:
			f.at(time.Minute, func() {
				grantTok = s.token(f, "bob", signed.Claims{Action: signed.ActionGrant, Grant: g})
				grant = f.grantUpdate(workflows.UpdateGrant, grantTok)
			})
			f.at(2*time.Minute, func() { s.decide(f, "bob", signed.ActionReject, "c-1", nil) })
		case 1:
			f.at(time.Minute, func() { replay = f.grantUpdate(workflows.UpdateGrant, grantTok) })
			f.at(2*time.Minute, func() { s.decide(f, "bob", signed.ActionReject, "c-2", nil) })
		}
	})
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Len(t, inputs, 3, "each step of progress, then continue-as-new")
	require.NoError(t, grant.err)
	require.Len(t, inputs[1].Carry.Spent, 2, "bob's grant and his rejection of c-1")
	require.ErrorContains(t, replay.err, "bob's token was taken already in this run chain")
}

// One signer may spend at most MaxTokensPerSigner live tokens in a run
// chain (rules version 9, issue 33 item 5): bob decides 320 refunds as they
// come, five steps of 64; past his 256th token his decisions are refused,
// saying why, and carol's are taken — no one signer crowds out another.
func TestNoSignerCrowdsOutAnother(t *testing.T) {
	s := newSigners(t)
	f := newFixture(t, withPolicy(s.policy))
	var turns [][]tool.Proposal
	for step := range 5 {
		var calls []tool.Proposal
		for i := range workflows.MaxCallsPerStep {
			calls = append(calls, refundCall(6000+100*step+i, ""))
		}
		turns = append(turns, calls)
	}
	var bobs, carols []*updateOutcome
	for m := 1; m <= 5; m++ {
		f.at(time.Duration(m)*time.Minute, func() {
			for _, it := range f.state().Interrupts {
				bobs = append(bobs, s.decide(f, "bob", signed.ActionReject, it.CallID, nil))
			}
		})
	}
	f.at(5*time.Minute+30*time.Second, func() {
		for _, it := range f.state().Interrupts {
			carols = append(carols, s.decide(f, "carol", signed.ActionReject, it.CallID, nil))
		}
	})
	res := f.run(scripted(turns...))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	taken, refused := 0, 0
	for _, o := range bobs {
		if o.err == nil {
			taken++
			continue
		}
		refused++
		require.ErrorContains(t, o.err, "bob has spent 256 tokens in this run chain that are still valid, at most 256 per signer")
	}
	require.Equal(t, workflows.MaxTokensPerSigner, taken)
	require.Equal(t, 5*workflows.MaxCallsPerStep-workflows.MaxTokensPerSigner, refused)
	require.Len(t, carols, refused)
	for _, o := range carols {
		require.NoError(t, o.err, "carol is not crowded out by bob")
	}
	require.Empty(t, f.desk.payments)
}
