package confirm

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Under a policy, an approver whose via names the link's channel decides by
// the link: the handler signs the decision with the link key, bound as the
// client binds one (kind, asked), via the channel, valid five minutes.
func TestPolicyViaEmailSignsWithTheLinkKey(t *testing.T) {
	x := newFixture(t, true)
	tok := x.link("alice", notify.ViaEmail)
	status, _, page := x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(tok), nil, nil)
	require.Equal(t, http.StatusOK, status, page)
	assert.Contains(t, unesc(page), "You decide as alice via email")
	assert.NotContains(t, page, "keyfile")

	status, body := x.post(url.Values{"t": {tok}, "decision": {"reject"}, "reason": {"not this one"}})
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "rejected c-3 (close_ticket) as alice via email")
	_, acted := x.f.calls()
	require.Len(t, acted, 1)
	in := acted[0].In
	assert.Equal(t, workflows.DecisionInput{CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Kind: workflows.KindGate, Via: "email", Token: in.Token}, in,
		"approver and reason come from the token")
	c, err := signed.Verify(in.Token, x.viaPub)
	require.NoError(t, err, "the link key's public key verifies the decision")
	now := x.now.Unix()
	assert.Equal(t, signed.Claims{Approver: "alice", WorkflowID: "run-1", Action: signed.ActionReject, CallID: "c-3", ArgsDigest: x.it.ArgsDigest,
		Kind: "gate", Asked: x.it.RequestedAt.UnixNano(), Reason: "not this one", Via: "email", IssuedAt: now, Expiry: now + 300}, c)

	// A Slack message's link names its target, never an approver — even a
	// target named as one whose via is slack: on the page it decides only
	// signed (a click in Slack decides as the user Slack signs for).
	for _, name := range []string{"carol", "alice"} {
		status, body = x.post(url.Values{"t": {x.link(name, notify.ViaSlack)}, "decision": {"approve"}})
		assert.Equal(t, http.StatusForbidden, status, body)
		assert.Contains(t, unesc(body), "a link from slack \""+name+"\" names no approver")
	}
	// carol's via is email only: her e-mail link does not decide alone... and
	// alice's does (above); bob, with no via, signs.
	status, body = x.post(url.Values{"t": {x.link("bob", notify.ViaEmail)}, "decision": {"approve"}})
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, unesc(body), "bob may not decide through email")
}

// A policy whose via_key is not the handler's via key — another key, or
// the link key the workers sign links with — and a handler with no via key:
// no decision is signed (the run would refuse it); the page asks for a
// signature.
func TestPolicyWithAnotherViaKeyAsksForASignature(t *testing.T) {
	x := newFixture(t, true)
	pub, _, _ := signed.GenerateKey()
	for _, key := range []string{signed.FormatPublicKey(pub), signed.FormatPublicKey(x.linkPub)} {
		x.pol.ViaKey = key
		status, body := x.post(url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}})
		assert.Equal(t, http.StatusForbidden, status, body)
		assert.Contains(t, unesc(body), "not this listener's --via-key")
	}
	y := newFixture(t, true, func(o *Options) { o.ViaKey = nil })
	status, body := y.post(url.Values{"t": {y.link("alice", notify.ViaEmail)}, "decision": {"approve"}})
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, unesc(body), "not this listener's --via-key")
	x.mustNotDecide("another via key")
	y.mustNotDecide("no via key")
}

// Under a policy, an approver without via signs in the page: the GET page
// shows a key-file input and what to sign; a POST without a token is
// refused, asking for a signature; a browser's token passes unchanged.
func TestPolicyWithoutViaTakesTheBrowsersToken(t *testing.T) {
	x := newFixture(t, true)
	tok := x.link("bob", notify.ViaEmail)
	status, _, page := x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(tok), nil, nil)
	require.Equal(t, http.StatusOK, status, page)
	for _, want := range []string{`id="keyfile"`, `data-sign="1"`, `data-wid="run-1"`, `data-call="c-3"`, `data-digest="` + x.it.ArgsDigest + `"`,
		`data-kind="gate"`, `data-valid="600"`, `name="token"`, `id="name" value="bob"`} {
		assert.Contains(t, page, want)
	}
	assert.Regexp(t, `data-asked="`+itoa(x.it.RequestedAt.UnixNano())+`"`, page)
	assert.Contains(t, unesc(page), "bob may not decide through email")

	status, body := x.post(url.Values{"t": {tok}, "decision": {"approve"}})
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, unesc(body), "sign the decision with your key")
	x.mustNotDecide("no token")

	now := x.now.Unix()
	browser, err := signed.Sign(x.keys["bob"], signed.Claims{Approver: "bob", WorkflowID: "run-1", Action: signed.ActionApprove, CallID: "c-3",
		ArgsDigest: x.it.ArgsDigest, Kind: "gate", Asked: x.it.RequestedAt.UnixNano(), Note: "fine", IssuedAt: now, Expiry: now + 600})
	require.NoError(t, err)
	status, body = x.post(url.Values{"t": {tok}, "decision": {"reject"}, "token": {browser}})
	assert.Equal(t, http.StatusBadRequest, status, "a token that approves, posted as a reject: %s", body)
	x.mustNotDecide("mismatched token")
	status, body = x.post(url.Values{"t": {tok}, "decision": {"approve"}, "reason": {"fine"}, "token": {browser}})
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "approved c-3 (close_ticket) as bob")
	_, acted := x.f.calls()
	require.Len(t, acted, 1)
	assert.Equal(t, workflows.DecisionInput{CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Kind: workflows.KindGate, Token: browser}, acted[0].In,
		"the browser's token, unchanged, and nothing the token does not say")
}

// Without a policy, a token in the form is refused: the link decides.
func TestNoPolicyRefusesAToken(t *testing.T) {
	x := newFixture(t, false)
	status, body := x.post(url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}, "token": {"x.y.z"}})
	assert.Equal(t, http.StatusBadRequest, status, body)
	x.mustNotDecide("a token without a policy")

}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Two approvers who sign on one link are two updates (a quorum counts
// both); the same signer posting again is the same update.
func TestSignedInThePageTheUpdateIsTheSigners(t *testing.T) {
	x := newFixture(t, true)
	tok := x.link("bob", notify.ViaEmail)
	now := x.now.Unix()
	sign := func(name string, iat int64) string {
		s, err := signed.Sign(x.keys[name], signed.Claims{Approver: name, WorkflowID: "run-1", Action: signed.ActionApprove, CallID: "c-3",
			ArgsDigest: x.it.ArgsDigest, Kind: "gate", Asked: x.it.RequestedAt.UnixNano(), IssuedAt: iat, Expiry: iat + 600})
		require.NoError(t, err)
		return s
	}
	for _, s := range []string{sign("bob", now), sign("bob", now+1), sign("carol", now)} {
		status, body := x.post(url.Values{"t": {tok}, "decision": {"approve"}, "token": {s}})
		require.Equal(t, http.StatusOK, status, body)
	}
	req, acted := x.f.calls()
	require.Len(t, req, 3)
	assert.Equal(t, req[0].UpdateID, req[1].UpdateID, "bob twice: one update")
	assert.NotEqual(t, req[0].UpdateID, req[2].UpdateID, "carol on bob's link: another")
	assert.Len(t, acted, 2)
}
