package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/confirm"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

const closeArgs = `{"ticket_id":"TKT-3","resolution":"password reset fixed"}`

// closeRun closes TKT-3: one destructive call, which waits at the gate.
func closeRun() workflows.RunInput {
	return workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", closeArgs)))}
}

// startWaiting starts closeRun as id on s and returns its call once it waits.
func startWaiting(s *stack, id string) workflows.Interrupt {
	s.t.Helper()
	s.start(id, closeRun())
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	return s.mustState(id).Interrupts[0]
}

// A waiting call produces one message per target — a signed webhook, a
// Slack message with buttons, an e-mail — each with the call's facts and a
// link; a Slack click whose signature is bad or old, or that reaches a
// listener with no signing secret, is refused and changes nothing; a signed
// click approves, the run completes, the message is replaced by the
// outcome, and the same click again acts once.
func TestNotificationsReachEveryTargetAndASignedClickDecides(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "")
	r.serve(s, nil)
	const id = "notify-every-target"
	it := startWaiting(s, id)
	testenv.Eventually(t, notifyTimeout, "a message at every target", func() error {
		if h, m, e := len(r.hook.requests("/hook")), len(r.slackMessages()), len(r.mail.Messages()); h < 1 || m < 1 || e < 1 {
			return fmt.Errorf("webhook %d, Slack %d, e-mail %d", h, m, e)
		}
		return nil
	})

	hooks := r.hook.requests("/hook")
	if len(hooks) != 1 {
		t.Fatalf("%d webhook deliveries, want 1", len(hooks))
	}
	if err := notify.VerifySignature(hookSecret, hooks[0].header.Get(notify.SignatureHeader), hooks[0].body, time.Now(), time.Minute); err != nil {
		t.Fatalf("the webhook's signature: %v", err)
	}
	var b notify.WebhookBody
	if err := json.Unmarshal(hooks[0].body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Event != workflows.NotifyWaiting || b.WorkflowID != id || b.CallID != "c-1" || b.Tool != "close_ticket" || b.ArgsDigest != it.ArgsDigest ||
		!b.ExpiresAt.Equal(it.ExpiresAt) || b.Reason != it.Reason || !strings.HasPrefix(b.Link, r.door.URL+"/confirm?t=") {
		t.Fatalf("webhook body %s\nwant the waiting c-1 close_ticket with digest %s, expiry %s and a link to %s", hooks[0].body, it.ArgsDigest, it.ExpiresAt, r.door.URL)
	}
	if key := hooks[0].header.Get("Idempotency-Key"); key == "" || key != b.Delivery {
		t.Fatalf("Idempotency-Key %q, delivery %q", key, b.Delivery)
	}

	msgs := r.slackMessages()
	if len(msgs) != 1 {
		t.Fatalf("%d Slack messages, want 1", len(msgs))
	}
	approve := button(t, msgs[0], "toolgate_approve")
	if open := button(t, msgs[0], "toolgate_open"); !strings.HasPrefix(open, r.door.URL+"/confirm?t=") {
		t.Fatalf("the Open button's url %q", open)
	}
	if raw, _ := json.Marshal(msgs[0]); !strings.Contains(string(raw), "close_ticket") || !strings.Contains(string(raw), "TKT-3") {
		t.Fatalf("the Slack message lacks the call's facts: %s", raw)
	}

	mails := r.mail.Messages()
	if len(mails) != 1 || !slices.Equal(mails[0].To, []string{opsMail}) || mails[0].User != smtpUser {
		t.Fatalf("e-mails %+v, want one to %s after AUTH as %s", mails, opsMail, smtpUser)
	}
	if text := mailText(t, mails[0]); !strings.Contains(text, "close_ticket") || !strings.Contains(text, it.ArgsDigest) {
		t.Fatalf("the e-mail lacks the call's facts:\n%s", text)
	}
	linkIn(t, mails[0])

	// Refused clicks: an old timestamp, a wrong signing secret, and a listener
	// with no signing secret configured (even for a click signed as Slack would).
	c2 := *r.cfg
	c2.Targets = slices.Clone(r.cfg.Targets)
	for i := range c2.Targets {
		c2.Targets[i].SigningSecret = ""
	}
	bare := httptest.NewServer(confirm.New(s.tg, confirm.Options{Notify: &c2}))
	defer bare.Close()
	for what, status := range map[string]int{
		"6 minutes old":        r.clickAt(r.door.URL, slackSecret, time.Now().Add(-6*time.Minute), "U0DANA", "toolgate_approve", approve),
		"another secret":       r.clickAt(r.door.URL, "not-the-secret", time.Now(), "U0DANA", "toolgate_approve", approve),
		"no secret configured": r.clickAt(bare.URL, slackSecret, time.Now(), "U0DANA", "toolgate_approve", approve),
	} {
		if status != http.StatusUnauthorized {
			t.Errorf("a click %s: HTTP %d, want 401", what, status)
		}
	}
	if st := s.mustState(id); st.Status != workflows.StatusWaitingForApproval || len(st.Interrupts) != 1 {
		t.Fatalf("after refused clicks the run is %s with %d waiting, want c-1 still waiting", st.Status, len(st.Interrupts))
	}

	if status := r.click(slackSecret, time.Now(), "U0DANA", "toolgate_approve", approve); status != http.StatusOK {
		t.Fatalf("a signed click: HTTP %d", status)
	}
	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
	testenv.Eventually(t, waitTimeout, "the Slack message replaced by the outcome", func() error {
		for _, q := range r.slack.requests("/respond/U0DANA") {
			var m map[string]any
			_ = json.Unmarshal(q.body, &m)
			if m["replace_original"] == true && !strings.Contains(string(q.body), "toolgate_approve") && strings.Contains(string(q.body), "approved") {
				return nil
			}
		}
		return fmt.Errorf("response_url posts: %d", len(r.slack.requests("/respond/U0DANA")))
	})
	if status := r.click(slackSecret, time.Now(), "U0DANA", "toolgate_approve", approve); status != http.StatusOK {
		t.Fatalf("the same click again: HTTP %d", status)
	}
	r.waitForReplies()
	approvals := records(s.mustTrace(id), "c-1", workflows.TraceApproved)
	if len(approvals) != 1 || approvals[0].Approver != "slack:u0dana" || approvals[0].Via != "slack:u0dana: slack" {
		t.Fatalf("approvals %+v, want one by slack:u0dana via slack", approvals)
	}
	if tk, err := s.openDesk().Ticket(t.Context(), "TKT-3"); err != nil || tk.Status != "closed" || tk.ApprovedBy != "slack:u0dana" {
		t.Fatalf("TKT-3 %+v (%v), want closed, approved by slack:u0dana", tk, err)
	}
	got := notices(res.Trace)
	for _, target := range []string{"ops (webhook)", "team (slack)", "mail (email)"} {
		for _, event := range []string{"waiting", "decided"} {
			if n := countContaining(got, "c-1 notified "+target+" "+event); n != 1 {
				t.Errorf("%d notified records for %s %s, want 1: %q", n, target, event, got)
			}
		}
	}
}

func countContaining(list []string, s string) int {
	n := 0
	for _, v := range list {
		if strings.Contains(v, s) {
			n++
		}
	}
	return n
}

// The e-mail's link opens the confirm page: a GET — a mail scanner's —
// decides nothing; an expired, tampered or other-arguments link is refused;
// the page's POST approves, recorded as made through e-mail.
func TestEmailLinkGetDecidesNothingAndThePagesPostApproves(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "")
	r.serve(s, nil)
	const id = "notify-email-link"
	it := startWaiting(s, id)
	testenv.Eventually(t, notifyTimeout, "the e-mail", func() error {
		if len(r.mail.Messages()) == 0 {
			return fmt.Errorf("no e-mail yet")
		}
		return nil
	})
	link := linkIn(t, r.mail.Messages()[0])
	for range 3 {
		if status, body := get(t, link); status != http.StatusOK || !strings.Contains(body, "close_ticket") || !strings.Contains(body, it.ArgsDigest) {
			t.Fatalf("GET %s: %d\n%s", link, status, body)
		}
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("after three GETs the run has %d calls waiting, want c-1 still waiting", len(st.Interrupts))
	}
	tok := tokenOf(t, link)
	now := time.Now()
	past, err := notify.SignLink(r.linkKey, notify.Link{WorkflowID: id, CallID: "c-1", ArgsDigest: it.ArgsDigest, Asked: it.RequestedAt.UnixNano(), Recipient: opsMail, Channel: notify.ViaEmail,
		Expires: now.Add(-time.Hour)}, now.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := notify.SignLink(r.linkKey, notify.Link{WorkflowID: id, CallID: "c-1", ArgsDigest: strings.Repeat("0", 64), Asked: it.RequestedAt.UnixNano(), Recipient: opsMail, Channel: notify.ViaEmail,
		Expires: now.Add(time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	tampered := tok[:len(tok)/2] + flip(tok[len(tok)/2]) + tok[len(tok)/2+1:]
	for what, c := range map[string]struct {
		token  string
		status int
		says   string
	}{
		"expired":         {past, http.StatusGone, "expired"},
		"tampered":        {tampered, http.StatusBadRequest, "link refused"},
		"other arguments": {other, http.StatusConflict, "arguments"},
	} {
		if status, body := r.confirmPost(c.token, "approve", ""); status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("POST of the %s link: %d, want %d saying %q:\n%s", what, status, c.status, c.says, body)
		}
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("after the refused POSTs the run has %d calls waiting, want c-1 still waiting", len(st.Interrupts))
	}
	if status, body := r.confirmPost(tok, "approve", ""); status != http.StatusOK || !strings.Contains(body, "approved") {
		t.Fatalf("the page's POST: %d\n%s", status, body)
	}
	res := s.result(id, waitTimeout)
	approvals := records(res.Trace, "c-1", workflows.TraceApproved)
	if res.Status != workflows.StatusCompleted || len(approvals) != 1 || approvals[0].Approver != opsMail || approvals[0].Via != opsMail+": email" {
		t.Fatalf("result %s, approvals %+v, want completed, approved by %s via email", res.Status, approvals, opsMail)
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// A target that returns 500 and one that never answers in time: each is
// tried NotifyAttempts times and no more, the decision goes through while
// they fail, and the trace says what failed.
func TestFailingTargetsNeverHoldUpTheRun(t *testing.T) {
	longSuite(t)
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "")
	down := newRecorder(t, http.StatusInternalServerError)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-req.Context().Done():
		}
	}))
	defer slow.Close()
	r.cfg = r.parse(fmt.Sprintf(`
targets:
  - {name: down, webhook: "%s/hook", secret: "${HOOK_SECRET}"}
  - {name: slow, webhook: "%s/hook", secret: "${HOOK_SECRET}", timeout: 1s}
events: [waiting]
`, down.srv.URL, slow.URL))
	r.serve(s, nil)
	const id = "notify-failing"
	it := startWaiting(s, id)
	if _, err := s.approveByUpdate(id, workflows.DecisionInput{CallID: "c-1", Approver: "bob", ArgsDigest: it.ArgsDigest}); err != nil {
		t.Fatalf("approving while the targets fail: %v", err)
	}
	testenv.Eventually(t, waitTimeout, "TKT-3 closed while deliveries still fail", func() error {
		if tk, err := s.openDesk().Ticket(t.Context(), "TKT-3"); err != nil || tk.Status != "closed" {
			return fmt.Errorf("TKT-3 %+v (%v)", tk, err)
		}
		return nil
	})
	res := s.result(id, 2*time.Minute)
	if res.Status != workflows.StatusCompleted {
		t.Fatalf("result %+v, want completed", res)
	}
	if n := len(down.requests("/hook")); n != workflows.NotifyAttempts {
		t.Errorf("the failing target took %d attempts, want %d (the retry bound)", n, workflows.NotifyAttempts)
	}
	got := notices(res.Trace)
	want := fmt.Sprintf("(gave up after %d attempts)", workflows.NotifyAttempts)
	if len(got) != 2 || countContaining(got, "c-1 notify_failed down (webhook) waiting down (webhook): HTTP 500") != 1 ||
		countContaining(got, "c-1 notify_failed slow (webhook) waiting") != 1 || countContaining(got, want) != 2 {
		t.Fatalf("notification records %q, want each target's failure after %d attempts", got, workflows.NotifyAttempts)
	}
	i := slices.IndexFunc(res.Trace, func(x workflows.TraceRecord) bool { return x.Status == workflows.TraceOK })
	j := slices.IndexFunc(res.Trace, func(x workflows.TraceRecord) bool { return x.Status == workflows.TraceNotifyFailed })
	if i < 0 || j < i {
		t.Fatalf("the close ran at trace record %d, the first failure was recorded at %d: the failing targets held the call up", i, j)
	}
}
