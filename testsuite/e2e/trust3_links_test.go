package e2e

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// forgeLink is what anyone holding the workers' link key can make for a
// waiting call whose digest and requested_at the state query gives: a link
// for recipient through channel, with a secret of their choosing.
func forgeLink(t *testing.T, key ed25519.PrivateKey, id string, it workflows.Interrupt, recipient, channel, secret string) string {
	t.Helper()
	tok, err := notify.SignLink(key, notify.Link{WorkflowID: id, CallID: it.CallID, ArgsDigest: it.ArgsDigest, Asked: it.RequestedAt.UnixNano(),
		Recipient: recipient, Channel: channel, Expires: time.Now().Add(time.Hour), Secret: secret}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Under a policy that lets alice decide by e-mail, whoever holds the link
// key (every worker host) forges alice's link — with no secret, or one of
// their own — and POSTs it: a listener that reads the authority namespace
// refuses it (no worker recorded it); one that cannot signs the decision
// with its via key, and the run refuses it, for it never sent that link. Alice's real
// link decides; the audit ties her approval to the link the run sent.
func TestALinkDecidesOnlyIfTheRunSentIt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "events: [waiting]")
	k := newKeyring(t, "alice", "bob")
	pol, err := policy.Parse(fmt.Appendf(nil, linkPolicyYAML, signed.FormatPublicKey(r.viaKey.Public().(ed25519.PublicKey)), k.pub("alice"), k.pub("bob")))
	if err != nil {
		t.Fatal(err)
	}
	r.serve(s, pol)
	const id = "trust3-links"
	s.start(id, closeRun())
	s.awaitNext(id, waitTimeout, "gate:close_ticket (0 of 2 approvals)")
	it := s.mustState(id).Interrupts[0]
	testenv.Eventually(t, notifyTimeout, "the e-mails", func() error {
		if n := len(r.mail.Messages()); n < 3 {
			return fmt.Errorf("%d e-mails", n)
		}
		return nil
	})
	var alices string
	for _, m := range r.mail.Messages() {
		if m.To[0] == "alice@example.com" {
			alices = linkIn(t, m)
		}
	}
	if alices == "" {
		t.Fatal("no e-mail to alice")
	}
	for what, tok := range map[string]string{
		"no secret":             forgeLink(t, r.linkKey, id, it, "alice", notify.ViaEmail, ""),
		"a secret of one's own": forgeLink(t, r.linkKey, id, it, "alice", notify.ViaEmail, "chosen-by-the-attacker"),
	} {
		status, body := r.bareConfirmPost(tok, "approve", "")
		if status == http.StatusOK || !strings.Contains(body, "decision by link refused") && !strings.Contains(body, "carries no link secret") {
			t.Errorf("a forged link (%s): HTTP %d, want the run's refusal:\n%s", what, status, body)
		}
		requireListenerRefuses(t, r, what, tok)
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 || len(st.Interrupts[0].ApprovedBy) != 0 {
		t.Fatalf("after the forged links: %+v, want c-1 waiting with no approval", st.Interrupts)
	}
	if status, body := r.confirmPost(tokenOf(t, alices), "approve", ""); status != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("alice's own link: HTTP %d\n%s", status, body)
	}
	s.awaitNext(id, waitTimeout, "gate:close_ticket (1 of 2 approvals: alice)")
	s.signedDecide(id, k, "bob", true, "c-1")
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("result: %+v", res)
	}
	rep := s.audit(id, "")
	if len(rep.Failed()) > 0 || len(rep.Mismatches()) > 0 {
		t.Fatalf("the audit: failed %+v, mismatches %+v", rep.Failed(), rep.Mismatches())
	}
	var byLink int
	for _, e := range rep.Entries {
		if e.Channel == notify.ViaEmail && e.Verified && e.Approver == "alice" {
			byLink++
		}
	}
	if byLink != 1 {
		t.Fatalf("the audit's entries %+v, want alice's approval by e-mail verified", rep.Entries)
	}
}

// With no policy a link decides as whom it names, through its channel: a
// link forged for an address no notification went to (mallory's) decides
// nothing, and neither does a webhook's link forged with a secret of one's
// own; the webhook's own link decides.
func TestAForgedLinkDecidesNothingWithoutAPolicy(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "events: [waiting]")
	r.serve(s, nil)
	const id = "trust3-links-nopolicy"
	it := startWaiting(s, id)
	var hook notify.WebhookBody
	testenv.Eventually(t, notifyTimeout, "the webhook's link", func() error {
		for _, req := range r.hook.requests("/hook") {
			if json.Unmarshal(req.body, &hook) == nil && hook.Link != "" {
				return nil
			}
		}
		return fmt.Errorf("no webhook delivery with a link")
	})
	for what, tok := range map[string]string{
		"mallory's address":             forgeLink(t, r.linkKey, id, it, "mallory@example.com", notify.ViaEmail, "made-up"),
		"the webhook's, its own secret": forgeLink(t, r.linkKey, id, it, "ops", notify.ViaWebhook, "made-up"),
	} {
		if status, body := r.bareConfirmPost(tok, "approve", "ok"); status == http.StatusOK || !strings.Contains(body, "decision by link refused") {
			t.Errorf("a forged link (%s): HTTP %d, want the run's refusal:\n%s", what, status, body)
		}
		requireListenerRefuses(t, r, what, tok)
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("after the forged links: %+v, want c-1 still waiting", st)
	}
	if status, body := r.confirmPost(tokenOf(t, hook.Link), "approve", "ok"); status != http.StatusOK {
		t.Fatalf("the webhook's own link: HTTP %d\n%s", status, body)
	}
	res := s.result(id, waitTimeout)
	if got := records(res.Trace, "c-1", workflows.TraceApproved); res.Status != workflows.StatusCompleted || len(got) != 1 || got[0].Approver != "webhook:ops" {
		t.Fatalf("result %s, approvals %+v", res.Status, got)
	}
}

// requireListenerRefuses: the rig's listener, which reads the authority
// namespace, refuses the forged link tok before it signs anything — it has
// no record there — or, with no secret at all, leaves the refusal to the run.
func requireListenerRefuses(t *testing.T, r *notifyRig, what, tok string) {
	t.Helper()
	status, body := r.confirmPost(tok, "approve", "ok")
	body = html.UnescapeString(body)
	if status == http.StatusOK || !strings.Contains(body, "this link has no record in the authority namespace") && !strings.Contains(body, "carries no link secret") {
		t.Errorf("a forged link (%s) at a listener that reads the records: HTTP %d, want it refused:\n%s", what, status, body)
	}
}
