package e2e

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// linkPolicyYAML: closing a ticket takes two of support. Alice may decide
// by Slack and by e-mail, bob by neither; the via key is the rig's
// listener's (not the link key its worker signs links with).
const linkPolicyYAML = `
via_key: "%s"
approvers:
  alice: {key: "%s", roles: [support], slack: U0ALICE, email: alice@example.com, via: [slack, email]}
  bob:   {key: "%s", roles: [support], email: bob@example.com}
tools:
  close_ticket: {approvers: {roles: [support], count: 2}}
`

// Under a policy, a click counts only for an approver whose via names its
// channel, signed by the link key — and the run itself checks it. Each
// approver who may decide gets their own e-mail with their own link; bob's
// link cannot decide without his signature, and a Slack user who is nobody
// in the policy decides nothing.
func TestDecidingByLinkUnderAPolicy(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "events: [waiting]")
	keys := map[string]ed25519.PrivateKey{}
	var pubs []any
	pubs = append(pubs, signed.FormatPublicKey(r.viaKey.Public().(ed25519.PublicKey)))
	for _, name := range []string{"alice", "bob"} {
		pub, priv, err := signed.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[name], pubs = priv, append(pubs, signed.FormatPublicKey(pub))
	}
	pol, err := policy.Parse(fmt.Appendf(nil, linkPolicyYAML, pubs...))
	if err != nil {
		t.Fatal(err)
	}
	r.serve(s, pol)
	const id = "notify-policy"
	s.start(id, closeRun())
	s.awaitNext(id, waitTimeout, "gate:close_ticket (0 of 2 approvals)")
	testenv.Eventually(t, notifyTimeout, "the e-mails and the Slack message", func() error {
		if e, m := len(r.mail.Messages()), len(r.slackMessages()); e < 3 || m < 1 {
			return fmt.Errorf("%d e-mails, %d Slack messages", e, m)
		}
		return nil
	})
	links := map[string]string{}
	for _, m := range r.mail.Messages() {
		if len(m.To) != 1 {
			t.Fatalf("an e-mail to %v: want one message per recipient", m.To)
		}
		links[m.To[0]] = linkIn(t, m)
	}
	if len(links) != 3 || links["alice@example.com"] == "" || links["bob@example.com"] == "" || links[opsMail] == "" {
		t.Fatalf("e-mails to %v, want alice's, bob's and %s's", slices.Sorted(maps.Keys(links)), opsMail)
	}

	// Bob's link: the page asks for his signature, and a POST without one decides nothing.
	if status, body := get(t, links["bob@example.com"]); status != http.StatusOK || !strings.Contains(strings.ToLower(body), "key") {
		t.Fatalf("bob's page: %d, want one that asks for his key:\n%s", status, body)
	}
	if status, body := r.confirmPost(tokenOf(t, links["bob@example.com"]), "approve", ""); status == http.StatusOK || !strings.Contains(body, "sign") {
		t.Fatalf("bob's unsigned POST: %d, want a refusal asking for a signature:\n%s", status, body)
	}
	// A Slack user the policy does not know.
	approve := button(t, r.slackMessages()[0], "toolgate_approve")
	r.click(slackSecret, time.Now(), "U0MALLORY", "toolgate_approve", approve)
	r.waitForReplies()
	if st := s.mustState(id); len(st.Interrupts) != 1 || len(st.Interrupts[0].ApprovedBy) != 0 {
		t.Fatalf("after bob's unsigned POST and mallory's click: %+v, want c-1 waiting with no approval", st.Interrupts)
	}

	// Alice's click in Slack counts: signed by the link key, checked by the run.
	if status := r.click(slackSecret, time.Now(), "U0ALICE", "toolgate_approve", approve); status != http.StatusOK {
		t.Fatalf("alice's click: HTTP %d", status)
	}
	r.waitForReplies()
	s.awaitNext(id, waitTimeout, "gate:close_ticket (1 of 2 approvals: alice)")
	// Alice's e-mail link again: she has approved already.
	if status, body := r.confirmPost(tokenOf(t, links["alice@example.com"]), "approve", ""); status == http.StatusOK {
		t.Fatalf("alice approving twice: %d\n%s", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	outs, err := s.tg.Approve(ctx, id, tgclient.Decider{Approver: "bob", Key: keys["bob"], Text: "ok by bob"}, "c-1")
	if err != nil || outs[0].Err != nil {
		t.Fatalf("bob's signed approval: %v %v", err, outs)
	}
	res := s.result(id, waitTimeout)
	approvals := records(res.Trace, "c-1", workflows.TraceApproved)
	if res.Status != workflows.StatusCompleted || len(approvals) != 1 || approvals[0].Approver != "alice, bob" || approvals[0].Via != "alice: slack" {
		t.Fatalf("result %s, approvals %+v, want completed, approved by alice (via slack) and bob", res.Status, approvals)
	}
}
