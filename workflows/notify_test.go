package workflows_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// notifier is a worker.Notifier that records each attempt: target "down"
// always fails as a server error would, "refuses" as a 4xx would. For a
// waiting call it reports links as sent (the failures, as their details).
type notifier struct {
	targets []workflows.NotifyTarget
	links   []workflows.LinkProof
	mu      sync.Mutex
	got     []workflows.Notification
}

// sentLink is the proof of a link with secret sent to to through via.
func sentLink(secret, to, via string) workflows.LinkProof {
	return workflows.LinkProof{Digest: workflows.LinkDigest(secret), Recipient: to, Channel: via}
}

func (n *notifier) Targets() []workflows.NotifyTarget { return n.targets }

func (n *notifier) Deliver(_ context.Context, x workflows.Notification) (workflows.Delivery, error) {
	n.mu.Lock()
	n.got = append(n.got, x)
	n.mu.Unlock()
	var links []workflows.LinkProof
	var details []any
	if x.Event == workflows.NotifyWaiting && len(n.links) > 0 {
		links, details = n.links, []any{n.links}
	}
	switch x.Target {
	case "down":
		return workflows.Delivery{}, temporal.NewApplicationErrorWithOptions("down (webhook): HTTP 500", "NotifyFailed", temporal.ApplicationErrorOptions{Details: details})
	case "refuses":
		return workflows.Delivery{}, temporal.NewApplicationErrorWithOptions("refuses (webhook): HTTP 404", "NotifyRefused", temporal.ApplicationErrorOptions{NonRetryable: true, Details: details})
	}
	return workflows.Delivery{Target: x.Target, Kind: "webhook", Detail: "HTTP 200", Links: links}, nil
}

// attempts lists "target event call" for each attempt, in order.
func (n *notifier) attempts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, x := range n.got {
		out = append(out, strings.TrimSpace(x.Target+" "+x.Event+" "+x.CallID))
	}
	return out
}

func withNotifier(n *notifier) fixtureOption { return func(o *worker.Options) { o.Notify = n } }

func target(name string, events ...string) workflows.NotifyTarget {
	return workflows.NotifyTarget{Name: name, Kind: "webhook", Events: events}
}

func notices(trace []workflows.TraceRecord) []string {
	var out []string
	for _, r := range trace {
		if r.Status == workflows.TraceNotified || r.Status == workflows.TraceNotifyFailed {
			out = append(out, fmt.Sprintf("%s %s: %s%s", r.CallID, r.Status, r.Reason, r.Error))
		}
	}
	return out
}

// A waiting call tells every target that takes "waiting", once, with what a
// human needs to decide it; its decision tells those that take "decided";
// each delivery is in the trace.
func TestNotificationsTellEachTargetOnce(t *testing.T) {
	n := &notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyEvents...), target("team", workflows.NotifyWaiting)}}
	f := newFixture(t, withNotifier(n))
	var digest string
	f.at(time.Minute, func() {
		require.ElementsMatch(t, []string{"ops waiting c-2", "team waiting c-2"}, n.attempts())
		digest = f.digest("c-2")
		f.approve("c-2")
	})
	res := f.run(scripted(steps(call("search_tickets", `{"query":"login"}`)), steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.ElementsMatch(t, []string{"ops waiting c-2", "team waiting c-2", "ops decided c-2"}, n.attempts())
	w := n.got[0]
	require.Equal(t, "default-test-workflow-id", w.WorkflowID)
	require.NotEmpty(t, w.RunID)
	require.Equal(t, "close_ticket", w.Tool)
	require.JSONEq(t, `{"ticket_id":"TKT-3"}`, string(w.Args))
	require.Equal(t, digest, w.ArgsDigest)
	require.Equal(t, "gate", w.Kind)
	require.Equal(t, workflows.StatusWaitingForApproval, w.Status)
	require.Equal(t, w.RequestedAt.Add(workflows.DefaultApprovalTimeout), w.ExpiresAt)
	require.Nil(t, w.Needs, "no policy: any operator may decide")
	d := n.got[2]
	require.Equal(t, workflows.TraceApproved, d.Decision)
	require.Equal(t, "alice", d.By)
	require.ElementsMatch(t, []string{
		"c-2 notified: ops (webhook) waiting: HTTP 200",
		"c-2 notified: team (webhook) waiting: HTTP 200",
		"c-2 notified: ops (webhook) decided: HTTP 200",
	}, notices(res.Trace))
}

// A target that keeps failing is tried NotifyAttempts times, one that
// refuses once; neither holds up the decision nor fails the run, and the
// trace says what failed.
func TestFailingTargetsNeverHoldUpTheRun(t *testing.T) {
	n := &notifier{targets: []workflows.NotifyTarget{target("down", workflows.NotifyWaiting), target("refuses", workflows.NotifyWaiting)}}
	f := newFixture(t, withNotifier(n))
	f.at(time.Second, func() { f.approve("c-1") })
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 1, f.desk.count("close_ticket"), "the call ran on its approval")
	att := n.attempts()
	require.Equal(t, workflows.NotifyAttempts, countOf(att, "down waiting c-1"), "retries stop at their bound")
	require.Equal(t, 1, countOf(att, "refuses waiting c-1"), "a refusal is not retried")
	got := notices(res.Trace)
	require.Len(t, got, 2)
	require.Contains(t, strings.Join(got, "\n"), fmt.Sprintf("c-1 notify_failed: down (webhook) waitingdown (webhook): HTTP 500 (gave up after %d attempts)", workflows.NotifyAttempts))
	require.Contains(t, strings.Join(got, "\n"), "c-1 notify_failed: refuses (webhook) waitingrefuses (webhook): HTTP 404 (not retried")
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// No decision in time tells "expired"; a run that fails tells "failed", a
// deny-policy run that stops tells "blocked" — and the run waits for those
// deliveries before it ends, so they are in its trace.
func TestExpiredFailedAndBlockedAreTold(t *testing.T) {
	n := &notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyExpired, workflows.NotifyFailed, workflows.NotifyBlocked)}}
	f := newFixture(t, withNotifier(n))
	in := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)), steps(call("search_tickets", `{"query":"x"}`)))
	in.ApprovalTimeout, in.MaxTurns = workflows.Duration(time.Hour), 2
	res := f.run(in)
	require.Equal(t, workflows.StatusFailed, res.Status)
	require.ElementsMatch(t, []string{"ops expired c-1", "ops failed"}, n.attempts())
	failed := slices.IndexFunc(n.got, func(x workflows.Notification) bool { return x.Event == workflows.NotifyFailed })
	require.Contains(t, n.got[failed].Error, "max_turns")
	// Deliveries are recorded as they finish: the two may finish in either order.
	require.ElementsMatch(t, []string{"c-1 notified: ops (webhook) expired: HTTP 200", " notified: ops (webhook) failed: HTTP 200"}, notices(res.Trace))

	n2 := &notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyBlocked)}}
	f2 := newFixture(t, withNotifier(n2))
	in2 := scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`)))
	in2.Approval = workflows.PolicyDeny
	res2 := f2.run(in2)
	require.Equal(t, workflows.StatusBlocked, res2.Status)
	require.Equal(t, []string{"ops blocked c-1"}, n2.attempts())
	require.Equal(t, "close_ticket", n2.got[0].Tool)
}

// linkPolicy lets alice decide by Slack and by e-mail, not bob; the
// listener's via key is the policy's via_key.
func linkPolicy(t *testing.T, s *signers) (ed25519.PrivateKey, *policy.Policy) {
	pub, priv, err := signed.GenerateKey()
	require.NoError(t, err)
	pubOf := func(name string) string { return signed.FormatPublicKey(s.keys[name].Public().(ed25519.PublicKey)) }
	text := fmt.Sprintf(`
via_key: "%s"
approvers:
  alice: {key: "%s", roles: [support], slack: U0ALICE, email: alice@example.com, via: [slack, email]}
  bob:   {key: "%s", roles: [support], email: bob@example.com}
  carol: {key: "%s", roles: [finance]}
tools:
  close_ticket: {approvers: {roles: [support]}}
`, signed.FormatPublicKey(pub), pubOf("alice"), pubOf("bob"), pubOf("carol"))
	p, err := policy.Parse([]byte(text))
	require.NoError(t, err)
	return priv, p
}

// A decision by link counts only as the link signer's token for an approver
// whose via names its channel, approving or rejecting; the trace says which
// channel. Every other use of the link key is refused, saying why.
func TestDecisionsByLink(t *testing.T) {
	s := newSigners(t)
	linkKey, pol := linkPolicy(t, s)
	n := &notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyWaiting)},
		links: []workflows.LinkProof{sentLink("team-slack", "team", "slack"), sentLink("alice-mail", "alice", "email"), sentLink("bob-mail", "bob", "email")}}
	f := newFixture(t, withPolicy(pol), withNotifier(n))
	secrets := map[string]string{"slack": "team-slack", "email": "alice-mail"}
	byLink := func(name, action, via string, edit func(*signed.Claims)) *updateOutcome {
		c := signed.Claims{Approver: name, WorkflowID: "default-test-workflow-id", Action: action, CallID: "c-1", ArgsDigest: f.digest("c-1"),
			Asked: f.asked("c-1"), Via: via, Link: secrets[via], IssuedAt: f.env.Now().Unix(), Expiry: f.env.Now().Unix() + 300}
		if action == signed.ActionReject {
			c.Reason = "no"
		}
		if edit != nil {
			edit(&c)
		}
		tok, err := signed.Sign(linkKey, c)
		require.NoError(t, err)
		in := workflows.DecisionInput{CallID: "c-1", ArgsDigest: c.ArgsDigest, Via: via, Token: tok}
		if action == signed.ActionRespond {
			in.Response = []byte(`"done"`)
		}
		update := action
		if action == "link" {
			update = workflows.UpdateApprove
		}
		return f.update(update, in)
	}
	cases := map[string]*updateOutcome{}
	var good *updateOutcome
	f.at(time.Minute, func() {
		require.Len(t, n.got, 1)
		require.Equal(t, []workflows.Recipient{
			{Name: "alice", Email: "alice@example.com", Slack: "U0ALICE", Via: []string{"slack", "email"}},
			{Name: "bob", Email: "bob@example.com"},
		}, n.got[0].Approvers, "who may decide: support's approvers, with where they are reached")
		cases["bob has no via"] = byLink("bob", signed.ActionApprove, "email", nil)
		cases["carol's role"] = byLink("carol", signed.ActionApprove, "slack", func(c *signed.Claims) {})
		cases["a channel alice lacks"] = byLink("alice", signed.ActionApprove, "sms", nil)
		cases["a link is no decision"] = byLink("alice", "link", "slack", nil)
		cases["the link key cannot respond"] = byLink("alice", signed.ActionRespond, "slack", nil)
		cases["the link key cannot edit"] = byLink("alice", signed.ActionApprove, "slack", func(c *signed.Claims) { c.EditedDigest = strings.Repeat("e", 64) })
		cases["alice's own key with a via"] = func() *updateOutcome {
			return s.decide(f, "alice", signed.ActionApprove, "c-1", func(c *signed.Claims, in *workflows.DecisionInput) { c.Via, in.Via = "slack", "slack" })
		}()
		cases["a via the token does not sign"] = s.decide(f, "alice", signed.ActionApprove, "c-1", func(_ *signed.Claims, in *workflows.DecisionInput) { in.Via = "slack" })
		cases["a link the run never sent"] = byLink("alice", signed.ActionApprove, "slack", func(c *signed.Claims) { c.Link = "made-with-the-link-key" })
		cases["no link secret"] = byLink("alice", signed.ActionApprove, "email", func(c *signed.Claims) { c.Link = "" })
		cases["bob's e-mail link, as alice"] = byLink("alice", signed.ActionApprove, "email", func(c *signed.Claims) { c.Link = "bob-mail" })
		cases["the Slack link as an e-mail"] = byLink("alice", signed.ActionApprove, "email", func(c *signed.Claims) { c.Link = "team-slack" })
	})
	f.at(2*time.Minute, func() {
		for name, c := range cases {
			require.True(t, c.done, name)
			require.Error(t, c.err, name)
		}
		require.Equal(t, []string{"gate:close_ticket"}, f.next(), "nothing refused changed the call")
		good = byLink("alice", signed.ActionApprove, "slack", nil)
	})
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	for name, want := range map[string]string{
		"bob has no via":                "bob may not decide through email",
		"carol's role":                  "carol may not decide through slack",
		"a channel alice lacks":         `via "sms" refused: want slack, email or webhook`,
		"a link is no decision":         `signs "link": a decision by link may only approve or reject`,
		"the link key cannot respond":   `signs "respond"`,
		"the link key cannot edit":      "edits, answers or grants",
		"alice's own key with a via":    "not signed by the policy's via_key",
		"a via the token does not sign": `via "slack" is not the one alice's token signs`,
		"a link the run never sent":     "this run sent no slack link with this secret for call c-1's wait",
		"no link secret":                "it carries no link secret",
		"bob's e-mail link, as alice":   "this run sent no email link to alice with this secret",
		"the Slack link as an e-mail":   "this run sent no email link to alice with this secret",
	} {
		require.ErrorContains(t, cases[name].err, want, name)
	}
	require.NoError(t, good.err)
	require.Equal(t, 1, f.desk.count("close_ticket"))
	for _, r := range res.Trace {
		if r.Status == workflows.TraceApproved {
			require.Equal(t, "alice", r.Approver)
			require.Equal(t, "alice: slack", r.Via)
			return
		}
	}
	t.Fatal("no approval in the trace")
}

// With no policy a click's channel is recorded as given, and only slack or
// email are channels.
func TestViaWithoutPolicy(t *testing.T) {
	// The link was sent by a delivery that then failed: its details still
	// tell the run of it, and it decides.
	n := &notifier{targets: []workflows.NotifyTarget{target("down", workflows.NotifyWaiting)}, links: []workflows.LinkProof{sentLink("mail-secret", "alice@example.com", "email")}}
	f := newFixture(t, withNotifier(n))
	var bad, unsent, noLink, asRule, good *updateOutcome
	f.at(time.Minute, func() {
		bad = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice", ArgsDigest: f.digest("c-1"), Via: "carrier pigeon"})
		unsent = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice@example.com", ArgsDigest: f.digest("c-1"), Via: "email", Link: "guessed"})
		noLink = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice@example.com", ArgsDigest: f.digest("c-1"), Via: "email"})
		asRule = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "Rule:small-refunds", ArgsDigest: f.digest("c-1")})
	})
	f.at(2*time.Minute, func() {
		good = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", Approver: "alice@example.com", ArgsDigest: f.digest("c-1"), Via: "email", Link: "mail-secret"})
	})
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.ErrorContains(t, bad.err, `via "carrier pigeon" refused: want slack, email or webhook`)
	require.ErrorContains(t, unsent.err, "this run sent no email link to alice@example.com with this secret")
	require.ErrorContains(t, noLink.err, "it carries no link secret")
	require.ErrorContains(t, asRule.err, `approver "Rule:small-refunds" refused: names starting with rule:, grant:, policy: are the run's own`)
	require.NoError(t, good.err)
	i := slices.IndexFunc(res.Trace, func(r workflows.TraceRecord) bool { return r.Status == workflows.TraceApproved })
	require.Equal(t, "alice@example.com: email", res.Trace[i].Via)
}

// A delivery's result is no proof of what it sent (rules version 13): the
// links it reports count only if the worker recorded them before sending.
// Here the delivery reports alice's Slack link, and no record holds it (a
// delivery completed by someone else, with links of their own): her click
// on it decides nothing, and the trace says why the links were refused.
func TestUnrecordedLinksDecideNothing(t *testing.T) {
	s := newSigners(t)
	linkKey, pol := linkPolicy(t, s)
	n := &notifier{targets: []workflows.NotifyTarget{target("ops", workflows.NotifyWaiting)},
		links: []workflows.LinkProof{sentLink("team-slack", "team", "slack")}}
	f := newFixture(t, withPolicy(pol), withNotifier(n))
	f.unrecorded = true
	var click *updateOutcome
	f.at(time.Minute, func() {
		c := signed.Claims{Approver: "alice", WorkflowID: "default-test-workflow-id", Action: signed.ActionApprove, CallID: "c-1", ArgsDigest: f.digest("c-1"),
			Asked: f.asked("c-1"), Via: "slack", Link: "team-slack", IssuedAt: f.env.Now().Unix(), Expiry: f.env.Now().Unix() + 300}
		tok, err := signed.Sign(linkKey, c)
		require.NoError(t, err)
		click = f.update(workflows.UpdateApprove, workflows.DecisionInput{CallID: "c-1", ArgsDigest: c.ArgsDigest, Via: "slack", Token: tok})
	})
	f.at(2*time.Minute, func() {
		require.True(t, click.done)
		require.ErrorContains(t, click.err, "this run sent no slack link with this secret for call c-1's wait")
		require.Equal(t, []string{"gate:close_ticket"}, f.next(), "the call still waits")
		s.decide(f, "alice", signed.ActionApprove, "c-1", nil)
	})
	res := f.run(scripted(steps(call("close_ticket", `{"ticket_id":"TKT-3"}`))))
	require.Equal(t, 1, f.desk.count("close_ticket"), "alice's own signed approval decides")
	for _, r := range res.Trace {
		if r.Status == workflows.TraceNotified {
			require.Contains(t, r.Reason, "have no record in the authority namespace")
			return
		}
	}
	t.Fatal("no notified record in the trace")
}
