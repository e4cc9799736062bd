package e2e

import (
	"net"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/workflows"
)

// When the inbox's server goes away (the demo exited), the page says so and
// what to do, marks the cards as last seen and refuses to send a decision
// from them; when a server answers on the same address again, the page is
// live again and an approval goes through.
func TestInboxSaysWhenItsServerIsGoneInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	s.startWorker(false)
	const id = "inbox-offline"
	s.start(id, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener) *http.Server {
		srv := &http.Server{Handler: inbox.New(s.tg, inbox.Options{})}
		go func() { _ = srv.Serve(ln) }()
		return srv
	}
	srv := serve(ln)
	browse(t, ctx, "open the inbox", chromedp.Navigate("http://"+addr+"/"))
	await(t, ctx, "the call listed", `document.querySelectorAll('.card').length === 1 && document.getElementById('error').hidden`)

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, "the page says the server is gone", `!document.getElementById('error').hidden &&
		document.getElementById('error').textContent.includes('The inbox server does not answer') &&
		document.getElementById('error').textContent.includes('as last seen') &&
		document.getElementById('live').textContent.startsWith('offline since')`)
	await(t, ctx, "the card marked and its buttons off", `document.querySelector('`+card(id)+`').classList.contains('stale') &&
		document.querySelector('`+card(id)+` .approve').disabled && document.querySelector('`+card(id)+` .reject').disabled`)
	// A click that gets through anyway (the button re-enabled by hand) sends nothing.
	eval(t, ctx, "click approve anyway", `(() => { const b = document.querySelector('`+card(id)+` .approve'); b.disabled = false; b.click(); })()`)
	await(t, ctx, "the decision not sent", `document.querySelector('`+card(id)+` .msg').textContent.startsWith('not sent: the list could not be loaded')`)
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("a decision reached the run while the page was offline: %+v", st)
	}
	t.Logf("offline: %s", read(t, ctx, "read the banner", chromedp.TextContent(chromedp.CSS("#error"))))

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	srv = serve(ln)
	defer srv.Close()
	await(t, ctx, "live again", `document.getElementById('error').hidden && document.getElementById('live').textContent.startsWith('live') &&
		!document.querySelector('`+card(id)+`').classList.contains('stale') && !document.querySelector('`+card(id)+` .approve').disabled`)
	browse(t, ctx, "approve", chromedp.Click(chromedp.CSS(card(id)+" .approve")))
	s.awaitStatus(id, workflows.StatusCompleted, 0, waitTimeout)
	await(t, ctx, "the card gone", `document.querySelectorAll('.card').length === 0`)
}
