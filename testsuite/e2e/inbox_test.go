package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/internal/chromiumtest"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// browser starts headless Chromium (internal/chromiumtest).
func browser(t *testing.T) context.Context {
	return chromiumtest.Browser(t, "the approvals inbox's browser test", 2*time.Minute, chromedp.WindowSize(1000, 1300))
}

// browse runs chromedp actions, failing the test with what.
func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// read runs one chromedp action that gives a value.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates JavaScript in the page for its effect.
func eval(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	read(t, ctx, what, chromedp.Evaluate[any](expr))
}

// await polls a JavaScript expression in the page until it is true; if it
// never is, the test fails with what the page's messages say.
func await(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(waitTimeout))); err != nil {
		says, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
			`[...document.querySelectorAll('[id$=msg], #notices')].filter(e => e.textContent.trim()).map(e => e.id + ': ' + e.textContent.trim().slice(0, 300)).join(' | ')`))
		t.Fatalf("%s: %v; the page says: %s", what, err, says)
	}
}

// screenshot saves the page as a PNG under $TOOLGATE_ARTIFACTS (or the
// test's temporary directory) and logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TOOLGATE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	png := read(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

func card(run string) string { return fmt.Sprintf(`.card[data-run=%q]`, run) }

// The approvals inbox in real Chromium: two runs wait and are listed; a tool
// argument holding markup shows as text; a decision bound to a digest the
// run no longer has is refused on the page; an approval completes its run
// and its card goes away; a rejection's reason reaches the planner.
func TestInboxInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	s.startWorker(false)
	srv := httptest.NewServer(inbox.New(s.tg, inbox.Options{}))
	defer srv.Close()

	const closeRun, refundRun, hostile = "inbox-close", "inbox-refund", `<script>window.pwned=1</script><img src=x onerror=window.pwned=2>`
	hostileArgs, _ := json.Marshal(map[string]string{"query": hostile})
	s.start(closeRun, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed",
		step(call("search_tickets", string(hostileArgs))), step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.start(refundRun, workflows.RunInput{Goal: "refund the guest", Planner: scripted("done",
		step(call("refund", `{"booking_id":"BK-2","amount_cents":3000,"reason":"late check-in"}`)))})
	s.awaitNext(closeRun, waitTimeout, "gate:close_ticket")
	s.awaitNext(refundRun, waitTimeout, "gate:refund")

	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	await(t, ctx, "both waiting calls listed", `document.querySelectorAll('.card').length === 2`)
	shown := read(t, ctx, "read the page", chromedp.TextContent(chromedp.CSS("#calls")))
	for _, want := range []string{"close_ticket", "refund", `"booking_id": "BK-2"`, "args_digest", "goal: refund the guest"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page does not show %q; it shows:\n%s", want, shown)
		}
	}
	pwned := read(t, ctx, "window.pwned", chromedp.Evaluate[int](`window.pwned === undefined ? 0 : window.pwned`))
	// The page's own scripts are two: the signer (/sign.js) and app.js.
	scripts := read(t, ctx, "count scripts", chromedp.Evaluate[int](`document.querySelectorAll('script, #calls img').length`))
	auth := read(t, ctx, "read the banner", chromedp.TextContent(chromedp.CSS("#auth")))
	if pwned != 0 || scripts != 2 || !strings.Contains(shown, hostile) {
		t.Errorf("a tool argument holding markup ran or was parsed (pwned %d, %d script/img elements) or is not shown as text", pwned, scripts)
	}
	if !strings.Contains(auth, "Decisions are unauthenticated") {
		t.Errorf("without a policy the page must say decisions are unauthenticated; it says %q", auth)
	}
	screenshot(t, ctx, "inbox.png")

	// A decision bound to other arguments than the call's is refused, and the page says so.
	eval(t, ctx, "hold a stale digest", `document.querySelector('`+card(refundRun)+`').dataset.digest = '`+strings.Repeat("0", 64)+`'`)
	browse(t, ctx, "approve with a stale digest", chromedp.Click(chromedp.CSS(card(refundRun)+" .approve")))
	await(t, ctx, "the refusal shown", `document.querySelector('`+card(refundRun)+` .msg').textContent.includes('Refused as stale')`)
	t.Logf("stale decision: %s", read(t, ctx, "read the refusal", chromedp.TextContent(chromedp.CSS(card(refundRun)+" .msg"))))
	if st := s.mustState(refundRun); len(st.Interrupts) != 1 {
		t.Fatalf("the stale approval changed the run: %+v", st)
	}
	eval(t, ctx, "restore the digest", `document.querySelector('`+card(refundRun)+`').dataset.digest = '`+
		s.mustState(refundRun).Interrupts[0].ArgsDigest+`'`)

	// Approve: the run completes and its card goes away.
	browse(t, ctx, "approve the close", chromedp.SendKeys(chromedp.CSS(card(closeRun)+" .note"), "checked"),
		chromedp.Click(chromedp.CSS(card(closeRun)+" .approve")))
	s.awaitStatus(closeRun, workflows.StatusCompleted, 0, waitTimeout)
	await(t, ctx, "the approved call gone", `!document.querySelector('`+card(closeRun)+`') && document.querySelectorAll('.card').length === 1`)

	// Reject with a reason: the planner is told it.
	browse(t, ctx, "reject the refund", chromedp.SendKeys(chromedp.CSS(card(refundRun)+" .why"), "wrong booking"),
		chromedp.Click(chromedp.CSS(card(refundRun)+" .reject")))
	s.awaitStatus(refundRun, workflows.StatusCompleted, 0, waitTimeout)
	await(t, ctx, "the rejected call gone", `document.querySelectorAll('.card').length === 0`)
	rejected := false
	for _, r := range s.mustTrace(refundRun) {
		rejected = rejected || (r.Status == workflows.TraceRejected && r.Reason == "wrong booking")
	}
	if !rejected {
		t.Errorf("the trace of %s has no rejection with the reason: %+v", refundRun, s.mustTrace(refundRun))
	}

	checkBrowserSigning(t, ctx)
}

// checkBrowserSigning signs a decision with the page's own functions (the
// key loaded as the operator pastes it) and verifies it with signed.Verify;
// the page's digest of edited arguments (JSON text) is tool.Digest's, exactly.
func checkBrowserSigning(t *testing.T, ctx context.Context) {
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := signed.EncodePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pemText, _ := json.Marshal(string(keyPEM))
	// Numbers a double cannot hold (2^53+1, 1e400) are digested exactly, from the text.
	args := `{"z":[1,2.5,1e3,"é\u2028"],"a":{"y":true,"b":null},"amount_cents":9007199254740993,"e":-1.50E-7,"f":1e400}`
	want, err := tool.Digest("refund", json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	type signedOut struct{ Token, Digest string }
	script := fmt.Sprintf(`(async () => {
		const g = window.toolgateInbox, key = await g.importKey(%s);
		const digest = await g.digest('refund', %q);
		const token = await g.signToken(key, {sub: 'alice', wid: 'run-1', act: 'approve', call: 'c-2', digest: 'abc',
			kind: 'gate', asked: '1796027884627275501', edited_digest: digest, note: 'ok <b>', reason: '', iat: 1700000000, exp: 1700000600});
		return {token, digest};
	})()`, pemText, args)
	out := read(t, ctx, "sign in the page", chromedp.Evaluate[signedOut](script, chromedp.EvalAwaitPromise))
	if out.Digest != want {
		t.Errorf("the page's digest of the edited arguments is %s, tool.Digest's %s", out.Digest, want)
	}
	c, err := signed.Verify(out.Token, pub)
	if err != nil {
		t.Fatalf("the page's token does not verify: %v\n%s", err, out.Token)
	}
	wantClaims := signed.Claims{Approver: "alice", WorkflowID: "run-1", Action: "approve", CallID: "c-2", ArgsDigest: "abc",
		Kind: "gate", Asked: 1796027884627275501, EditedDigest: want, Note: "ok <b>", ID: c.ID, IssuedAt: 1700000000, Expiry: 1700000600}
	if c != wantClaims || len(c.ID) != 32 {
		t.Errorf("the page's token claims %+v, want %+v with a random jti (16 bytes in hex)", c, wantClaims)
	}
}
