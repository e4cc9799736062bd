package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/inbox"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Issue 20, item 11, in real Chromium: a refund of 9007199254740993 cents
// (2^53+1, which a JavaScript double rounds to …992) whose reason holds a
// right-to-left override, from a run whose goal holds a control character.
// The page shows the amount exactly, in the card and in the edit box, and
// every control and bidi character as a visible mark, never applied. An
// "edit" that changes nothing is refused by the run as the call's own
// arguments (the page sent the exact number, not …992), and a real edit
// reaches the run digit for digit.
func TestInboxShowsArgumentsExactlyInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	s.startWorker(false)
	srv := httptest.NewServer(inbox.New(s.tg, inbox.Options{}))
	defer srv.Close()

	const id = "inbox-exact"
	args := `{"booking_id":"BK-2","amount_cents":9007199254740993,"reason":"late ` + "\u202e" + `ni-kcehc` + "\u202c" + `"}`
	s.start(id, workflows.RunInput{Goal: "refund the guest\u0007 \u2066now\u2069", Planner: scripted("done", step(call("refund", args)))})
	s.awaitNext(id, waitTimeout, "gate:refund")

	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	await(t, ctx, "the call listed", `document.querySelectorAll('.card').length === 1`)
	shown := read(t, ctx, "read the card", chromedp.TextContent(chromedp.CSS(card(id))))
	for _, want := range []string{`"amount_cents": 9007199254740993`, `"reason": "late [U+202E RLO]ni-kcehc[U+202C PDF]"`,
		"goal: refund the guest[U+0007] [U+2066 LRI]now[U+2069 PDI]"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the card does not show %q; it shows:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "9007199254740992") || strings.ContainsAny(shown, "\u202e\u202c\u2066\u2069\u0007") {
		t.Errorf("the card shows a rounded amount or an unmarked control or bidi character:\n%q", shown)
	}
	marks := read(t, ctx, "count the marks", chromedp.Evaluate[[]int](`['.args', '.goal', '.trace'].map((c) => document.querySelectorAll('`+card(id)+` ' + c + ' .ctl').length)`))
	if len(marks) != 3 || marks[0] != 2 || marks[1] != 3 || marks[2] != 2 {
		t.Errorf("marked characters in the arguments, goal and trace: %v, want [2 3 2] (RLO and PDF; BEL, LRI and PDI; the blocked record's RLO and PDF)", marks)
	}
	screenshot(t, ctx, "inbox-exact.png")
	edit := read(t, ctx, "read the edit box", chromedp.Evaluate[string](`document.querySelector('`+card(id)+` .edited').value`))
	if !strings.Contains(edit, `"amount_cents": 9007199254740993`) || !strings.Contains(edit, `\u202e`) || strings.Contains(edit, "\u202e") {
		t.Errorf("the edit box holds %q: want the exact amount and the override escaped", edit)
	}

	// "Approve edited arguments" with nothing changed: the run gets the
	// exact arguments, so it refuses them as the call's own.
	browse(t, ctx, "approve an unchanged edit", chromedp.Click(chromedp.CSS(card(id)+" .edit summary")),
		chromedp.Click(chromedp.CSS(card(id)+" .approve-edited")))
	msgOf := `(() => { const m = document.querySelector('` + card(id) + ` .msg'); return m ? m.textContent : 'the card is gone'; })()`
	await(t, ctx, "the run answers the edit", `(`+msgOf+`).match(/Refused|approved|the card is gone/) !== null`)
	msg := read(t, ctx, "read the answer", chromedp.Evaluate[string](msgOf))
	if !strings.Contains(msg, "edited_args are the call's own arguments") {
		t.Fatalf("an unchanged edit: the page says %q, want the run's refusal of the call's own arguments (trace: %+v)", msg, s.mustTrace(id))
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("the unchanged edit changed the run: %+v", st)
	}

	// A real edit: 2^53+3 (a double would make it …996) reaches the run exactly.
	eval(t, ctx, "edit the amount", `(() => { const e = document.querySelector('`+card(id)+` .edited');
		e.value = e.value.replace('9007199254740993', '9007199254740995'); })()`)
	browse(t, ctx, "approve the edit", chromedp.Click(chromedp.CSS(card(id)+" .approve-edited")))
	await(t, ctx, "the edit approved", `document.querySelector('`+card(id)+` .msg') === null || document.querySelector('`+card(id)+` .msg').textContent.includes('approved')`)
	s.awaitStatus(id, workflows.StatusCompleted, 0, waitTimeout)
	approved := records(s.mustTrace(id), "c-1", workflows.TraceEdited)
	want, _ := tool.Canonical(json.RawMessage(strings.Replace(args, "9007199254740993", "9007199254740995", 1)))
	if len(approved) != 1 || string(approved[0].Args) != string(want) {
		t.Errorf("the approval in the trace: %+v, want the edited arguments %s exactly", approved, want)
	}
}

// apiLog records what the inbox answered to each API request, and how the
// browser said it was made (Sec-Fetch-Site, Sec-Fetch-Dest).
type apiLog struct {
	h    http.Handler
	mu   sync.Mutex
	seen []apiRequest
}

type apiRequest struct {
	method, site, dest string
	header             bool
	status             int
}

func (a *apiLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	a.h.ServeHTTP(sw, r)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		a.mu.Lock()
		a.seen = append(a.seen, apiRequest{r.Method, r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Sec-Fetch-Dest"), r.Header.Get(inbox.Header) != "", sw.status})
		a.mu.Unlock()
	}
}

func (a *apiLog) requests() []apiRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiRequest(nil), a.seen...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Issue 20, item 4, in real Chromium: another site's page open in the
// operator's browser tries to read the waiting calls through the inbox's API
// — a fetch with credentials, a fetch with credentials and the inbox's
// header, a <script src> inclusion. The inbox answers none of them with run
// data, while its own page keeps listing the call.
func TestInboxAPIRefusesAnotherSiteInChromium(t *testing.T) {
	ctx := browser(t)
	s := newStack(t)
	s.startWorker(false)
	log := &apiLog{h: inbox.New(s.tg, inbox.Options{})}
	srv := httptest.NewServer(log)
	defer srv.Close()
	const id = "inbox-cross-site"
	s.start(id, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")

	api := srv.URL + "/api/pending"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>evil</title><script>
window.results = {};
fetch(%[1]q, {credentials: 'include'}).then((r) => r.text()).then((t) => { window.results.plain = t; }, (e) => { window.results.plain = 'error: ' + e; });
fetch(%[1]q, {credentials: 'include', headers: {'X-Toolgate-Inbox': '1'}}).then((r) => r.text()).then((t) => { window.results.header = t; }, (e) => { window.results.header = 'error: ' + e; });
</script><script src=%[1]q onload="window.results.script = 'loaded'" onerror="window.results.script = 'error'"></script>`, api)
	}))
	defer evil.Close()
	u, _ := url.Parse(evil.URL)
	evilURL := "http://localhost:" + u.Port() + "/" // another host than the inbox's 127.0.0.1: cross-site

	browse(t, ctx, "open the other site", chromedp.Navigate(evilURL))
	await(t, ctx, "the other site's three tries done", `window.results && ['plain', 'header', 'script'].every((k) => k in window.results)`)
	got := read(t, ctx, "read what the other site got", chromedp.Evaluate[map[string]string](`window.results`))
	for k, v := range got {
		if strings.Contains(v, id) || strings.Contains(v, "TKT-3") {
			t.Errorf("the other site read the waiting call through %s: %s", k, v)
		}
	}
	cross := 0
	for _, r := range log.requests() {
		if r.site != "same-origin" {
			cross++
			if r.status == http.StatusOK {
				t.Errorf("the inbox answered a cross-site request: %+v", r)
			}
		}
	}
	if cross == 0 {
		t.Errorf("no cross-site request reached the inbox (%+v): the test tried nothing", log.requests())
	}
	t.Logf("the other site got %q; the inbox saw %+v", got, log.requests())

	browse(t, ctx, "open the inbox", chromedp.Navigate(srv.URL))
	await(t, ctx, "the page's own script lists the call", `document.querySelectorAll('.card').length === 1`)
	ok := false
	for _, r := range log.requests() {
		ok = ok || (r.method == http.MethodGet && r.site == "same-origin" && r.header && r.status == http.StatusOK)
	}
	if !ok {
		t.Errorf("the page's own request was not answered: %+v", log.requests())
	}
}
