package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Under a worker policy the inbox signs in the browser: an approval sent
// before a key is loaded is refused on the page, and alice's — her key
// pasted into the page, the token made by WebCrypto — completes the run,
// with alice in the trace.
func TestInboxSignsUnderAPolicyInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := policyInbox(t, s, fmt.Sprintf("approvers:\n  alice: {key: %q, roles: [support]}\ntools:\n  close_ticket: {approvers: {roles: [support]}}\n"+
		"  search_tickets:\n    rules:\n      - {id: ask-archive, when: \"args.query == 'archive'\", decide: ask, approvers: {roles: [support]}}\n",
		signed.FormatPublicKey(pub)))

	const id = "inbox-signed"
	s.start(id, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	await(t, ctx, "the call listed", `document.querySelectorAll('.card').length === 1`)

	browse(t, ctx, "approve without a key", chromedp.Click(chromedp.CSS(card(id)+" .approve")))
	await(t, ctx, "the page asks for a key", `document.querySelector('`+card(id)+` .msg').textContent.includes('load your signing key')`)

	keyPEM, err := signed.EncodePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pemText, _ := json.Marshal(string(keyPEM))
	loadKey := func() { // the page keeps the key in memory only: once per page load
		eval(t, ctx, "paste the key", `document.getElementById('name').value = 'alice'; document.getElementById('pem').value = `+string(pemText))
		browse(t, ctx, "load the key", chromedp.Click(chromedp.CSS("#keybox summary")), chromedp.Click(chromedp.CSS("#loadkey")))
		await(t, ctx, "signing as alice", `document.getElementById('keystate').textContent.includes('Signing as alice')`)
	}
	loadKey()
	browse(t, ctx, "approve, signed", chromedp.SendKeys(chromedp.CSS(card(id)+" .note"), "signed in the browser"),
		chromedp.Click(chromedp.CSS(card(id)+" .approve")))
	s.awaitStatus(id, workflows.StatusCompleted, 0, waitTimeout)
	approved := records(s.mustTrace(id), "c-1", workflows.TraceApproved)
	if len(approved) != 1 || approved[0].Approver != "alice" || approved[0].Reason != "signed in the browser" {
		t.Errorf("c-1's approval in the trace: %+v, want alice's, with her note", approved)
	}

	// alice answers a read in the tool's place, signed in the browser: the
	// token names the SHA-256 of the canonical response the page computed
	// (a number past 2^53 kept exactly), which the run checks.
	const readID = "inbox-respond"
	s.start(readID, workflows.RunInput{Goal: "look in the archive", Planner: scripted("looked", step(call("search_tickets", `{"query":"archive"}`)))})
	s.awaitNext(readID, waitTimeout, "gate:search_tickets")
	browse(t, ctx, "reload", chromedp.Navigate(srv.URL))
	await(t, ctx, "the read listed", `document.querySelector('`+card(readID)+`') !== null`)
	loadKey()
	eval(t, ctx, "write the answer", `document.querySelector('`+card(readID)+` .response').value = '{"tickets": [{"id": "TKT-9", "n": 9007199254740993}]}'`)
	browse(t, ctx, "send the answer, signed", chromedp.Click(chromedp.CSS(card(readID)+" .respond summary")),
		chromedp.Click(chromedp.CSS(card(readID)+" .respond-send")))
	await(t, ctx, "the page says what became of the answer", `document.getElementById('notices').textContent.includes('`+readID+`')`)
	if msg := read[string](t, ctx, "the page's notice", chromedp.Evaluate[string](`document.getElementById('notices').textContent`)); !strings.Contains(msg, "responded c-1 (search_tickets) by alice") {
		t.Fatalf("the page says %q, want the response taken", msg)
	}
	s.awaitStatus(readID, workflows.StatusCompleted, 0, waitTimeout)
	responded := records(s.mustTrace(readID), "c-1", workflows.TraceResponded)
	if len(responded) != 1 || responded[0].Approver != "alice" || string(responded[0].Result) != `{"tickets":[{"id":"TKT-9","n":9007199254740993}]}` {
		t.Errorf("c-1's response in the trace: %+v, want alice's answer, exactly", responded)
	}
}
