package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The inbox names a fleet-wide pause above the calls and marks the call it
// stops, in Chromium; the operator's reason is shown as text, never markup.
func TestInboxShowsTheFleetsPauseInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := policyInbox(t, s, fmt.Sprintf("approvers:\n  alice: {key: %q, roles: [support, ops]}\noperators: [ops]\ntools:\n  close_ticket: {approvers: {roles: [support]}}\n",
		signed.FormatPublicKey(pub)))

	const id = "inbox-paused"
	s.start(id, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	await(t, ctx, "the call listed", `document.querySelectorAll('.card').length === 1`)
	await(t, ctx, "no pause shown", `document.getElementById('paused').hidden && document.querySelector('`+card(id)+` .paused-note').hidden`)

	if _, err := s.tg.Pause(context.Background(), workflows.TaskQueue, "close_ticket", `INC-7 <img src=x onerror="window.pwned=1">`, "alice", priv); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, "the pause named above the calls",
		`document.getElementById('paused').textContent.includes('PAUSED fleet-wide on task queue toolgate: close_ticket by alice') && !document.getElementById('paused').hidden`)
	await(t, ctx, "the call marked", `!document.querySelector('`+card(id)+` .paused-note').hidden`)
	await(t, ctx, "the reason as text", `document.getElementById('paused').textContent.includes('INC-7 <img') && document.querySelector('#paused img') === null && !window.pwned`)

	if _, err := s.tg.Unpause(context.Background(), workflows.TaskQueue, "close_ticket", "", "alice", priv); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, "the pause gone", `document.getElementById('paused').hidden && document.querySelector('`+card(id)+` .paused-note').hidden`)
}

// policyInbox starts the demo's worker under the policy src (with search
// attributes) on s, and an inbox over s's client; both stop with the test.
func policyInbox(t *testing.T, s *stack, src string) *httptest.Server {
	t.Helper()
	pol, err := policy.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	opts, d, err := demo.Options(s.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	opts.Policy, opts.SearchAttributes = pol, true
	w, err := worker.Start(s.client, workflows.TaskQueue, opts)
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); _ = d.Close() })
	srv := httptest.NewServer(inbox.New(s.tg, inbox.Options{}))
	t.Cleanup(srv.Close)
	return srv
}
