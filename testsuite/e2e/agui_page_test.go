package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	aguipage "github.com/toolgate/toolgate/examples/agui"
	"github.com/toolgate/toolgate/workflows"
)

// open is the card of the interrupt not answered yet.
const openCard = `.interrupt:not(.answered)`

// The example chat page in real Chromium, served by `toolgate dev
// --agui-address` under its CSP: a message, the interrupt card with the
// close's exact arguments, Approve, and the answer shown. Two more turns on
// the same thread (the page keeps and sends the thread's messages): Edit
// (the close runs with the arguments typed in the card) and Reject with a
// reason (the planner's answer says so).
func TestAGUIPageInChromium(t *testing.T) {
	ctx := browser(t)
	d := startAGUIDev(t)

	resp, err := http.Get(d.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != aguipage.CSP {
		t.Fatalf("GET %s/: %s, CSP %q", d.base, resp.Status, resp.Header.Get("Content-Security-Policy"))
	}

	pageWalkthrough(t, ctx, d.stack, d.base)
}

// pageWalkthrough is TestAGUIPageInChromium's walk-through on the page at
// base (and its endpoint, base/agui), whose runs s's server and worker hold.
func pageWalkthrough(t *testing.T, ctx context.Context, d *stack, base string) {
	browse(t, ctx, "open the chat", chromedp.Navigate(base+"/"))
	thread := read(t, ctx, "the page's thread", chromedp.Evaluate[string](`window.toolgateChat.threadId`))
	id := aguiThreadRun(thread)

	// Turn 1: approve.
	browse(t, ctx, "send the message", chromedp.SendKeys(chromedp.CSS("#message"), "find the login ticket and close it"),
		chromedp.Click(chromedp.CSS("#send")))
	await(t, ctx, "the interrupt card", `document.querySelectorAll('.interrupt').length === 1`)
	st := d.mustState(id)
	if len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-3" {
		t.Fatalf("run %s: %+v", id, st)
	}
	cardID := read(t, ctx, "the card's interrupt id", chromedp.Evaluate[string](`document.querySelector('.interrupt').dataset.interruptId`))
	cardText := read(t, ctx, "the card", chromedp.TextContent(chromedp.CSS(".interrupt")))
	if cardID != interruptID(st.Interrupts[0]) || !strings.Contains(cardText, "close_ticket") || !strings.Contains(cardText, `"ticket_id": "TKT-3"`) ||
		!strings.Contains(cardText, "expires") {
		t.Fatalf("the card (id %q, want %q) shows:\n%s", cardID, interruptID(st.Interrupts[0]), cardText)
	}
	if n := read(t, ctx, "count tool calls", chromedp.Evaluate[int](`document.querySelectorAll('.tool-call').length`)); n != 3 {
		t.Errorf("the page shows %d tool calls, want 3 (two searches and the close)", n)
	}
	screenshot(t, ctx, "agui-interrupt.png")
	browse(t, ctx, "approve", chromedp.Click(chromedp.CSS(openCard+" .approve")))
	await(t, ctx, "the answer shown", `[...document.querySelectorAll('.assistant')].some((e) => e.textContent.includes('Closed TKT-3'))`)
	if got := d.ticket("TKT-3").Status; got != "closed" {
		t.Fatalf("TKT-3 is %s after the page's approval", got)
	}

	// Turn 2: edit the arguments; the close runs with them.
	browse(t, ctx, "send the second message", chromedp.SendKeys(chromedp.CSS("#message"), "find the shipping ticket and close it"),
		chromedp.Click(chromedp.CSS("#send")))
	await(t, ctx, "the second card", `document.querySelectorAll('`+openCard+`').length === 1`)
	eval(t, ctx, "edit the arguments", `document.querySelector('`+openCard+` .edited-args').value = '{"ticket_id": "TKT-2", "resolution": "parcel found"}'`)
	browse(t, ctx, "approve the edited arguments", chromedp.Click(chromedp.CSS(openCard+" .edit")))
	await(t, ctx, "the second answer", `[...document.querySelectorAll('.assistant')].some((e) => e.textContent.includes('Closed TKT-2'))`)
	if tk := d.ticket("TKT-2"); tk.Status != "closed" || tk.Resolution != "parcel found" {
		t.Fatalf("TKT-2 %+v: want closed with the edited resolution", tk)
	}
	// The decision is recorded as what it was: an edit, keeping the
	// arguments as proposed.
	edited := 0
	for _, r := range d.mustTrace(id) {
		if r.CallID == "c-6" && r.Status == workflows.TraceEdited && len(r.OriginalArgs) > 0 {
			edited++
		}
	}
	if edited != 1 {
		t.Fatalf("c-6 has %d decisions recorded as an edit, want 1: %+v", edited, d.mustTrace(id))
	}

	// Turn 3: reject with a reason.
	browse(t, ctx, "send the third message", chromedp.SendKeys(chromedp.CSS("#message"), "find the invoice ticket and close it"),
		chromedp.Click(chromedp.CSS("#send")))
	await(t, ctx, "the third card", `document.querySelectorAll('`+openCard+`').length === 1`)
	browse(t, ctx, "reject", chromedp.SendKeys(chromedp.CSS(openCard+" .reason"), "the customer still waits for it"),
		chromedp.Click(chromedp.CSS(openCard+" .reject")))
	await(t, ctx, "the third answer", `[...document.querySelectorAll('.assistant')].some((e) => e.textContent.includes('did not close TKT-4') && e.textContent.includes('the customer still waits for it'))`)
	if got := d.ticket("TKT-4").Status; got != "open" {
		t.Fatalf("TKT-4 is %s after the page's rejection", got)
	}

	if errs := read(t, ctx, "errors shown", chromedp.Evaluate[string](`[...document.querySelectorAll('.error')].map((e) => e.textContent).join('\n')`)); errs != "" {
		t.Fatalf("the page shows errors:\n%s", errs)
	}
	roles := read(t, ctx, "the page's messages", chromedp.Evaluate[string](
		`window.toolgateChat.messages().map((m) => m.role + (m.toolCalls ? '+calls' : '')).join(' ')`))
	if strings.Count(roles, "user") != 3 || strings.Count(roles, "tool") != 9 || strings.Count(roles, "assistant+calls") < 3 {
		t.Fatalf("the thread the page keeps: %s; want 3 user messages, 9 tool results and the assistants' calls", roles)
	}
	if st := d.mustState(id); st.Calls != 9 || st.Turn != 3 || d.door(id) != "agui" {
		t.Fatalf("run %s: %d calls in turn %d (door %q); want 9 in turn 3 on one thread", id, st.Calls, st.Turn, d.door(id))
	}
	screenshot(t, ctx, "agui-chat.png")
}
