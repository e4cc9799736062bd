package confirm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// click is a Slack block_actions payload for a button of the message.
type click struct {
	user, username, action, value, responseURL string
}

func (x *fixture) slackBody(c click) string {
	x.t.Helper()
	if c.responseURL == "" {
		c.responseURL = x.slackSrv.URL + "/hooks/T0/1234/abcd"
	}
	p := map[string]any{"type": "block_actions", "trigger_id": "1.2.3",
		"user":         map[string]string{"id": c.user, "username": c.username, "name": c.username},
		"actions":      []map[string]string{{"action_id": c.action, "value": c.value, "action_ts": "1700000000.123456"}},
		"response_url": c.responseURL, "message": map[string]any{"ts": "1700000000.000100"}}
	b, err := json.Marshal(p)
	if err != nil {
		x.t.Fatal(err)
	}
	return url.Values{"payload": {string(b)}}.Encode()
}

// slackSign is Slack's signature of body at ts under secret.
func slackSign(secret, ts, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":" + body))
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// slack posts body as Slack would, signed with secret at ts (headers given
// override, "" removes one).
func (x *fixture) slack(body string, hdr map[string]string) (int, string) {
	x.t.Helper()
	ts := strconv.FormatInt(x.now.Unix(), 10)
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
		"X-Slack-Signature": slackSign(x.secret, ts, body)}
	for k, v := range hdr {
		h[k] = v
	}
	req, _ := http.NewRequest(http.MethodPost, x.srv.URL+"/slack/interactions", strings.NewReader(body))
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := x.srv.Client().Do(req)
	require.NoError(x.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A correctly signed click approves as the Slack user, via slack, and the
// message is replaced — the call's facts and the outcome, no buttons —
// through the click's response_url. Slack's retry of the click acts once.
func TestSlackClickApproves(t *testing.T) {
	x := newFixture(t, false)
	body := x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)})
	for range 2 {
		status, resp := x.slack(body, nil)
		require.Equal(t, http.StatusOK, status, resp)
	}
	req, acted := x.f.calls()
	require.Len(t, req, 2)
	require.Len(t, acted, 1, "Slack's retry of the same click acts once")
	assert.Equal(t, req[0].UpdateID, req[1].UpdateID)
	assert.True(t, strings.HasPrefix(req[0].UpdateID, "slack-"), req[0].UpdateID)
	assert.Equal(t, workflows.DecisionInput{CallID: "c-3", Approver: "slack:dana", Via: "slack", ArgsDigest: x.it.ArgsDigest, Kind: workflows.KindGate}, acted[0].In)
	got := x.posts()
	require.Len(t, got, 2)
	p := got[0]
	assert.Equal(t, "/hooks/T0/1234/abcd", p.Path)
	assert.Equal(t, true, p.Body["replace_original"])
	assert.Equal(t, "approved by slack:dana via slack", p.Body["text"])
	assert.NotContains(t, p.Raw, `"button"`, "no buttons left")
	assert.NotContains(t, p.Raw, `"actions"`, "no buttons left")
	assert.Contains(t, p.Raw, x.it.ArgsDigest, "the call's facts")
	assert.Contains(t, p.Raw, "close_ticket")

	// A rejection says who rejected it in Slack.
	x.slack(x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionReject, value: x.link("slack", notify.ViaSlack)}), nil)
	req, _ = x.f.calls()
	require.Len(t, req, 3)
	assert.Equal(t, "rejected in Slack by slack:dana", req[2].In.Reason)
	assert.False(t, req[2].Approve)
}

// Nothing is decided, and 401 says why, unless Slack's signature verifies:
// a bad signature, an old timestamp, a missing header, no secret configured.
func TestSlackRefusesWhatSlackDidNotSign(t *testing.T) {
	x := newFixture(t, false)
	body := x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)})
	old := strconv.FormatInt(x.now.Add(-6*time.Minute).Unix(), 10)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"bad signature", map[string]string{"X-Slack-Signature": slackSign("another secret", strconv.FormatInt(x.now.Unix(), 10), body)}, "bad X-Slack-Signature"},
		{"6 minutes old", map[string]string{"X-Slack-Request-Timestamp": old, "X-Slack-Signature": slackSign(slackSecret, old, body)}, "off this server's clock"},
		{"no signature", map[string]string{"X-Slack-Signature": ""}, "no X-Slack-Request-Timestamp or X-Slack-Signature"},
		{"no timestamp", map[string]string{"X-Slack-Request-Timestamp": ""}, "no X-Slack-Request-Timestamp or X-Slack-Signature"},
		{"body changed", map[string]string{"X-Slack-Signature": slackSign(slackSecret, strconv.FormatInt(x.now.Unix(), 10), body+"&x=1")}, "bad X-Slack-Signature"},
	} {
		status, resp := x.slack(body, c.hdr)
		assert.Equal(t, http.StatusUnauthorized, status, c.name)
		assert.Contains(t, resp, c.want, c.name)
	}
	x.mustNotDecide("unsigned clicks")
	assert.Empty(t, x.posts())

	// With no signing secret configured, every click is refused, however signed.
	y := newFixture(t, false, func(o *Options) { o.Notify.Targets[0].SigningSecret = "" })
	y.secret = "some secret"
	status, resp := y.slack(y.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: y.link("slack", notify.ViaSlack)}), nil)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Contains(t, resp, "no Slack signing secret is configured")
	y.mustNotDecide("no secret")
}

// Under a policy the clicker decides as the approver whose Slack id they
// have, if their via names slack; the decision is signed with the link key.
// Anyone else is told why, only them (ephemeral), and nothing is decided.
func TestSlackUnderPolicy(t *testing.T) {
	x := newFixture(t, true)
	link := x.link("slack", notify.ViaSlack)
	for _, c := range []struct{ name, user, want string }{
		{"no via slack", "U2", "bob may not decide through slack"},
		{"email only", "U3", "carol may not decide through slack"},
		{"unknown Slack user", "U7", "not an approver of this deployment's policy"},
	} {
		status, _ := x.slack(x.slackBody(click{user: c.user, username: "someone", action: notify.SlackActionApprove, value: link}), nil)
		assert.Equal(t, http.StatusOK, status, c.name)
		got := x.posts()
		require.NotEmpty(t, got, c.name)
		p := got[len(got)-1]
		assert.Equal(t, "ephemeral", p.Body["response_type"], c.name)
		assert.Equal(t, false, p.Body["replace_original"], c.name)
		assert.Contains(t, p.Body["text"], c.want, c.name)
	}
	x.mustNotDecide("clickers who may not decide")

	status, _ := x.slack(x.slackBody(click{user: "U1", username: "alice.s", action: notify.SlackActionReject, value: link}), nil)
	require.Equal(t, http.StatusOK, status)
	_, acted := x.f.calls()
	require.Len(t, acted, 1)
	in := acted[0].In
	assert.Equal(t, workflows.DecisionInput{CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Kind: workflows.KindGate, Via: "slack", Token: in.Token}, in)
	c, err := signed.Verify(in.Token, x.viaPub)
	require.NoError(t, err)
	assert.Equal(t, "alice", c.Approver)
	assert.Equal(t, "slack", c.Via)
	assert.Equal(t, signed.ActionReject, c.Action)
	assert.Equal(t, "rejected in Slack by alice", c.Reason)
	assert.Equal(t, x.it.RequestedAt.UnixNano(), c.Asked)
	got := x.posts()
	assert.Equal(t, "rejected by alice via slack", got[len(got)-1].Body["text"])
	assert.Equal(t, true, got[len(got)-1].Body["replace_original"])
}

// A response_url outside the configured prefixes gets nothing; the Open
// button and a link sent by e-mail decide nothing.
func TestSlackPostsOnlyWhereAllowed(t *testing.T) {
	x := newFixture(t, false)
	for _, u := range []string{x.slackSrv.URL + "/elsewhere/1", x.slackSrv.URL + "/hooksX/1", "https://evil.example/hooks/"} {
		status, _ := x.slack(x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack), responseURL: u}), nil)
		assert.Equal(t, http.StatusOK, status)
	}
	assert.Empty(t, x.posts(), "nothing posted outside the prefixes")
	_, acted := x.f.calls()
	assert.Len(t, acted, 1, "the decision itself is made (the same click each time)")

	y := newFixture(t, false)
	status, _ := y.slack(y.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionOpen, value: y.link("slack", notify.ViaSlack)}), nil)
	assert.Equal(t, http.StatusOK, status)
	status, _ = y.slack(y.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: y.link("alice", notify.ViaEmail)}), nil)
	assert.Equal(t, http.StatusOK, status)
	y.mustNotDecide("the Open button, and an e-mail link")
	got := y.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "ephemeral", got[0].Body["response_type"])
	assert.Contains(t, got[0].Body["text"], "not Slack")
}

// A run's refusal of who clicked (unauthorized: self-approval, a wrong role)
// is told only to them, the buttons left, and so is a failure to reach the
// run (another try may work); a call that no longer waits as shown
// replaces the message, saying so.
func TestSlackShowsTheRunsRefusal(t *testing.T) {
	x := newFixture(t, true)
	link := x.link("slack", notify.ViaSlack)
	x.f.decideErr = &client.Error{Kind: client.ErrUnauthorized, Msg: "self-approval refused: alice requested this run"}
	x.slack(x.slackBody(click{user: "U1", username: "alice", action: notify.SlackActionApprove, value: link}), nil)
	got := x.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "ephemeral", got[0].Body["response_type"])
	assert.Contains(t, got[0].Body["text"], "self-approval refused")

	x.f.decideErr = &client.Error{Kind: client.ErrAlreadyDecided, Msg: "call c-3 is not waiting"}
	x.slack(x.slackBody(click{user: "U1", username: "alice", action: notify.SlackActionApprove, value: link}), nil)
	got = x.posts()
	require.Len(t, got, 2)
	assert.Equal(t, true, got[1].Body["replace_original"])
	assert.Equal(t, "refused: call c-3 is not waiting", got[1].Body["text"])

	x.f.decideErr = errors.New("rpc error: code = Unavailable desc = connection refused")
	x.slack(x.slackBody(click{user: "U1", username: "alice", action: notify.SlackActionApprove, value: link}), nil)
	got = x.posts()
	require.Len(t, got, 3)
	assert.Equal(t, "ephemeral", got[2].Body["response_type"], "a run that could not answer keeps the buttons")
	assert.Equal(t, false, got[2].Body["replace_original"])

	// A run that has closed: no button of the message can decide.
	x.f.decideErr = &client.Error{Kind: client.ErrRunClosed, Msg: "run run-1 has completed (closed at 2026-01-02T03:04:05Z): it takes no more decisions"}
	x.slack(x.slackBody(click{user: "U1", username: "alice", action: notify.SlackActionApprove, value: link}), nil)
	got = x.posts()
	require.Len(t, got, 4)
	assert.Equal(t, true, got[3].Body["replace_original"])
	assert.Equal(t, "refused: run run-1 has completed (closed at 2026-01-02T03:04:05Z): it takes no more decisions", got[3].Body["text"])
}

// A response prefix matches at a path boundary only.
func TestResponsePrefixes(t *testing.T) {
	h := New(&fake{}, Options{Notify: &notify.Config{Targets: []notify.Target{
		{Name: "a", Slack: "https://hooks.slack.com/services/x"},
		{Name: "b", Slack: "https://hooks.slack.com/services/y", ResponseURLPrefix: "https://slack.internal.example/hooks"}}}})
	for u, want := range map[string]bool{
		"https://hooks.slack.com/actions/T0/1/abc":      true,
		"https://hooks.slack.com.evil.example/actions/": false,
		"https://slack.internal.example/hooks/T0/1":     true,
		"https://slack.internal.example/hooks":          true,
		"https://slack.internal.example/hooksmith/1":    false,
		"https://user@hooks.slack.com/actions/":         false,
		"http://hooks.slack.com/actions/T0/1/abc":       false,
		"": false,
	} {
		assert.Equal(t, want, h.responseAllowed(u), u)
	}
	assert.False(t, New(&fake{}, Options{}).responseAllowed("https://hooks.slack.com/actions/T0/1/abc"), "no notify file: nowhere")
}

// An approval that counts towards a quorum leaves the message and its
// buttons for the other approvers: the clicker alone is told; the page says
// how many approvals there are.
func TestQuorumApprovalKeepsTheButtons(t *testing.T) {
	x := newFixture(t, false)
	x.f.counted = true
	x.slack(x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)}), nil)
	got := x.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "ephemeral", got[0].Body["response_type"])
	assert.Equal(t, "counted the approval of c-3 (close_ticket) by slack:dana via slack: 1 of 2 approvals; it waits for more", got[0].Body["text"])
	status, body := x.post(url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}})
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "counted the approval of c-3 (close_ticket) by alice via email: 1 of 2 approvals")
}

// A run that does not answer in time: the clicker is told the decision may
// or may not be taken, and the message keeps its buttons.
func TestSlackTimeoutKeepsTheMessage(t *testing.T) {
	x := newFixture(t, false)
	x.f.decideErr = fmt.Errorf("approve c-3: %w", context.DeadlineExceeded)
	x.slack(x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)}), nil)
	got := x.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "ephemeral", got[0].Body["response_type"])
	assert.Contains(t, got[0].Body["text"], "may or may not be taken")
}

// A listener started without the deployment's policy takes no click on a
// run under one: nobody can be told an approver by it.
func TestSlackWithoutThePolicyDecidesNothingUnderOne(t *testing.T) {
	x := newFixture(t, true, func(o *Options) { o.Policy = nil })
	x.slack(x.slackBody(click{user: "U1", username: "alice", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)}), nil)
	x.mustNotDecide("no policy on the listener")
	got := x.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "ephemeral", got[0].Body["response_type"])
	assert.Contains(t, got[0].Body["text"], "started without the deployment's policy")
}

// A Slack request over MaxBodyBytes is refused unread.
func TestSlackBodyLimit(t *testing.T) {
	x := newFixture(t, false)
	status, _ := x.slack("payload="+strings.Repeat("x", MaxBodyBytes+1), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	x.mustNotDecide("a body over the limit")
}

// Text from a run reaches Slack as text: the blocks are plain_text, and the
// top-level text (mrkdwn) has &, < and > escaped, so it pings nobody.
func TestSlackTextPingsNobody(t *testing.T) {
	x := newFixture(t, false)
	x.f.decideErr = &client.Error{Kind: client.ErrDigestMismatch, Msg: "args of <!channel> & <https://evil.example|click>"}
	x.slack(x.slackBody(click{user: "U9", username: "dana", action: notify.SlackActionApprove, value: x.link("slack", notify.ViaSlack)}), nil)
	got := x.posts()
	require.Len(t, got, 1)
	assert.Equal(t, "refused: args of &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;", got[0].Body["text"])
	assert.NotContains(t, got[0].Raw, `"mrkdwn"`)
}
