package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/timeline"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// fake is a Backend over fixed runs: ids listed a page at a time as
// client.Pending lists them (two per page unless asked otherwise), each run's
// state and trace, the listings it was asked for and the decisions it was
// sent.
type fake struct {
	mu        sync.Mutex
	ids       []string
	states    map[string]workflows.State
	traces    map[string][]workflows.TraceRecord
	decideErr error
	decided   []workflows.DecisionInput
	responded []workflows.DecisionInput
	asked     []client.PendingOptions
	// timeline and preview are what Steps and RewindPreview read (rewind.go's
	// tests); rewound and forked what Rewind and Fork were asked to do.
	timeline *timeline.Timeline
	preview  timeline.Preview
	forkErr  error
	// forkRefused is what the fork's run answers once started (AwaitFork).
	forkRefused error
	rewound     []rewindCall
	forked      []forkCall
	// views are the fleet ledgers' views by task queue (none: never
	// started), guardsErr what a queue's ledger fails with; guarded the
	// queues Guards was asked for.
	views     map[string]ledger.View
	guardsErr map[string]error
	guarded   []string
}

func (f *fake) Guards(_ context.Context, taskQueue string) (ledger.View, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.guarded = append(f.guarded, taskQueue)
	if err := f.guardsErr[taskQueue]; err != nil {
		return ledger.View{}, false, err
	}
	v, ok := f.views[taskQueue]
	return v, ok, nil
}

func (f *fake) Pending(ctx context.Context, opts client.PendingOptions) (client.PendingPage, error) {
	f.mu.Lock()
	f.asked = append(f.asked, opts)
	f.mu.Unlock()
	start, size := 0, 2
	if len(opts.PageToken) > 0 {
		start = int(opts.PageToken[0])
	}
	if opts.PageSize != DefaultPageSize {
		size = opts.PageSize
	}
	ids := []string{}
	for _, id := range f.ids {
		waitsOn := opts.Tool == ""
		for _, it := range f.states[id].Interrupts {
			waitsOn = waitsOn || it.Tool == opts.Tool
		}
		if waitsOn && (opts.RunID == "" || opts.RunID == id) {
			ids = append(ids, id)
		}
	}
	end := min(start+size, len(ids))
	page := client.PendingPage{Calls: []client.PendingCall{}, Runs: end - start,
		Traces: map[string][]workflows.TraceRecord{}, TraceErrors: map[string]string{}}
	for _, id := range ids[start:end] {
		for _, it := range f.states[id].Interrupts {
			if opts.Tool == "" || it.Tool == opts.Tool {
				page.Calls = append(page.Calls, client.PendingCall{RunID: id, Policy: f.states[id].Policy, Interrupt: it})
			}
		}
		if tr, ok := f.traces[id]; ok {
			page.Traces[id] = tr[max(0, len(tr)-opts.TraceRecords):]
		}
	}
	if end < len(ids) {
		page.NextPageToken = []byte{byte(end)}
	}
	return page, nil
}

func (f *fake) State(_ context.Context, id string) (workflows.State, error) {
	st, ok := f.states[id]
	if !ok {
		return st, &client.Error{Kind: client.ErrUnknownRun, Msg: "no run with id " + id}
	}
	return st, nil
}

func (f *fake) Tool(_ context.Context, id, name string) (tool.Spec, error) {
	return tool.Spec{Name: name, Schema: json.RawMessage(`{"type":"object","properties":{"ticket_id":{"type":"string","pattern":"^TKT-[0-9]+$"}},"required":["ticket_id"],"additionalProperties":false}`)}, nil
}

func (f *fake) Decide(_ context.Context, id string, approve bool, in workflows.DecisionInput, _ ...client.DecideOption) (workflows.DecisionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decided = append(f.decided, in)
	if f.decideErr != nil {
		return workflows.DecisionResult{}, f.decideErr
	}
	d := "rejected"
	if approve {
		d = "approved"
	}
	return workflows.DecisionResult{CallID: in.CallID, Tool: "close_ticket", Decision: d, Approver: in.Approver}, nil
}

func (f *fake) Respond(_ context.Context, id string, in workflows.DecisionInput, _ ...client.DecideOption) (workflows.DecisionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.responded = append(f.responded, in)
	return workflows.DecisionResult{CallID: in.CallID, Tool: "lookup", Decision: workflows.TraceResponded, Approver: in.Approver}, nil
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func waiting(callID, toolName string, at time.Time) workflows.State {
	return workflows.State{Status: workflows.StatusWaitingForApproval, Interrupts: []workflows.Interrupt{{
		CallID: callID, Tool: toolName, CallArgs: json.RawMessage(`{"ticket_id":"TKT-3"}`), ArgsDigest: "d-" + callID,
		Kind: workflows.KindGate, RequestedAt: at, ExpiresAt: at.Add(time.Hour)}}}
}

func newFake() *fake {
	return &fake{
		ids: []string{"run-a", "run-b", "run-c"},
		states: map[string]workflows.State{
			"run-a": waiting("c-1", "close_ticket", t0),
			"run-b": waiting("c-2", "refund", t0.Add(time.Minute)),
			"run-c": waiting("c-3", "close_ticket", t0.Add(2*time.Minute)),
		},
		traces: map[string][]workflows.TraceRecord{
			"run-a": {{Seq: 1, CallID: "c-0", Tool: "search_tickets", Status: "ok", Result: json.RawMessage(`{"title":"<script>alert(1)</script>"}`)}},
		},
	}
}

// get is a GET as the inbox page's own script makes it (with the Header).
func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	return getWith(t, srv, path, map[string]string{Header: "1"})
}

func getWith(t *testing.T, srv *httptest.Server, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func list(t *testing.T, srv *httptest.Server, query string) List {
	t.Helper()
	resp, body := get(t, srv, "/api/pending"+query)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var l List
	require.NoError(t, json.Unmarshal([]byte(body), &l))
	return l
}

func calls(l List) []string {
	var out []string
	for _, c := range l.Calls {
		out = append(out, c.Run+"/"+c.CallID)
	}
	return out
}

// The page, its script and its stylesheet come with a CSP that forbids
// inline script, and the page has none; no static file writes HTML from data.
func TestPageIsServedUnderACSPWithoutInlineScript(t *testing.T) {
	srv := httptest.NewServer(New(newFake(), Options{}))
	defer srv.Close()
	for _, path := range []string{"/", "/sign.js", "/app.js", "/app.css", "/api/pending"} {
		resp, _ := getWith(t, srv, path, map[string]string{Header: "1", "Sec-Fetch-Site": "same-origin"})
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, CSP, resp.Header.Get("Content-Security-Policy"), path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
	}
	_, page := get(t, srv, "/")
	tags := regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1)
	require.Len(t, tags, 2, "the signer, then the page's script")
	assert.Contains(t, tags[0], `src="/sign.js"`, "only script files, no inline script: the signer first")
	assert.Contains(t, tags[1], `src="/app.js"`, "only script files, no inline script")
	assert.NotRegexp(t, `\son[a-z]+=`, page, "no inline event handlers")
	for _, path := range []string{"/sign.js", "/app.js"} {
		_, js := get(t, srv, path)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			assert.False(t, strings.Contains(js, sink), "%s uses %s: the script must insert run data as text only", path, sink)
		}
	}
}

// Calls are listed a page of runs at a time, newest first, filtered by tool
// or by run, each with its exact arguments, digest, asked time and trace.
func TestPendingPagesAndFilters(t *testing.T) {
	srv := httptest.NewServer(New(newFake(), Options{}))
	defer srv.Close()

	first := list(t, srv, "")
	assert.Equal(t, []string{"run-b/c-2", "run-a/c-1"}, calls(first), "newest first")
	require.NotEmpty(t, first.Next)
	second := list(t, srv, "?page="+first.Next)
	assert.Equal(t, []string{"run-c/c-3"}, calls(second))
	assert.Empty(t, second.Next, "the last page")

	a := first.Calls[1]
	assert.JSONEq(t, `{"ticket_id":"TKT-3"}`, string(a.CallArgs))
	assert.Equal(t, "d-c-1", a.ArgsDigest)
	assert.Equal(t, "1767323045000000006", a.Asked, "requested_at in Unix nanoseconds, exactly")
	require.Len(t, a.Trace, 1)

	assert.Equal(t, []string{"run-c/c-3", "run-a/c-1"}, calls(list(t, srv, "?tool=close_ticket")), "the runs waiting on close_ticket, chosen by the listing")
	assert.Equal(t, []string{"run-c/c-3"}, calls(list(t, srv, "?run=run-c")))
	assert.Empty(t, list(t, srv, "?run=nope").Calls)
	resp, body := get(t, srv, "/api/pending?size=0")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
}

// The inbox asks for one page of runs of the task queues it serves — its
// default page size unless the request says — with the tool and run filters
// given to the listing rather than applied after querying every run.
func TestPendingAsksForOnePageOfTheServedQueues(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{TaskQueues: []string{"desk", "desk-eu"}}))
	defer srv.Close()
	list(t, srv, "")
	list(t, srv, "?tool=refund&size=5&run=run-b")
	require.Len(t, f.asked, 2)
	assert.Equal(t, client.PendingOptions{PageSize: DefaultPageSize, TaskQueues: []string{"desk", "desk-eu"}, TraceRecords: 8}, f.asked[0])
	assert.Equal(t, client.PendingOptions{PageSize: 5, TaskQueues: []string{"desk", "desk-eu"}, Tool: "refund", RunID: "run-b", TraceRecords: 8}, f.asked[1])
}

// A tool result holding markup is served as JSON data, never as HTML.
func TestToolResultWithMarkupIsServedAsJSONData(t *testing.T) {
	srv := httptest.NewServer(New(newFake(), Options{}))
	defer srv.Close()
	resp, body := get(t, srv, "/api/pending?run=run-a")
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.NotContains(t, body, "<script>", "markup is escaped in the JSON text")
	var l List
	require.NoError(t, json.Unmarshal([]byte(body), &l))
	var result struct{ Title string }
	require.NoError(t, json.Unmarshal(l.Calls[0].Trace[0].Result, &result))
	assert.Equal(t, "<script>alert(1)</script>", result.Title, "and arrives intact as data")
}

func post(t *testing.T, srv *httptest.Server, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	return postTo(t, srv, "/api/decide", body, hdr)
}

const approveC1 = `{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d-c-1","kind":"gate","approver":"alice","note":"ok"}`

func good(srv *httptest.Server) map[string]string {
	return map[string]string{"Content-Type": "application/json", Header: "1", "Origin": srv.URL}
}

// Only a same-origin JSON POST carrying the inbox's header decides: a
// cross-origin one, a form, text/plain or a request without the header is
// refused before anything is sent to the run.
func TestDecideRefusesWhatAnotherSiteCouldSend(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	with := func(edit func(h map[string]string)) map[string]string {
		h := good(srv)
		edit(h)
		return h
	}
	cases := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"cross-origin", with(func(h map[string]string) { h["Origin"] = "https://evil.example" }), http.StatusForbidden},
		{"no origin", with(func(h map[string]string) { delete(h, "Origin") }), http.StatusForbidden},
		{"text/plain", with(func(h map[string]string) { h["Content-Type"] = "text/plain" }), http.StatusUnsupportedMediaType},
		{"form", with(func(h map[string]string) { h["Content-Type"] = "application/x-www-form-urlencoded" }), http.StatusUnsupportedMediaType},
		{"no header", with(func(h map[string]string) { delete(h, Header) }), http.StatusForbidden},
		{"cross-site fetch", with(func(h map[string]string) { h["Sec-Fetch-Site"] = "cross-site" }), http.StatusForbidden},
	}
	for _, c := range cases {
		code, out := post(t, srv, approveC1, c.hdr)
		assert.Equal(t, c.want, code, "%s: %v", c.name, out)
	}
	assert.Empty(t, f.decided, "nothing refused reached the run")

	code, out := post(t, srv, approveC1, good(srv))
	require.Equal(t, http.StatusOK, code, out)
	require.Len(t, f.decided, 1)
	assert.Equal(t, workflows.DecisionInput{CallID: "c-1", Approver: "alice", Note: "ok", ArgsDigest: "d-c-1", Kind: "gate"}, f.decided[0])

	resp, _ := get(t, srv, "/api/decide")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// A decision the run refuses as stale (other arguments, already decided, a
// run that has closed) is a 409 marked stale; bad bodies are refused before anything is sent.
func TestDecideRefusals(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	for _, kind := range []error{client.ErrDigestMismatch, client.ErrAlreadyDecided, client.ErrRunClosed} {
		f.decideErr = &client.Error{Kind: kind, Msg: "refused: " + kind.Error()}
		code, out := post(t, srv, approveC1, good(srv))
		assert.Equal(t, http.StatusConflict, code, out)
		assert.Equal(t, true, out["stale"], kind.Error())
		assert.Contains(t, out["error"], kind.Error())
	}
	f.decideErr = &client.Error{Kind: client.ErrUnauthorized, Msg: "bad signature"}
	code, out := post(t, srv, approveC1, good(srv))
	assert.Equal(t, http.StatusForbidden, code, out)
	assert.Equal(t, false, out["stale"])
	f.decideErr = errors.New("frontend unavailable")
	code, _ = post(t, srv, approveC1, good(srv))
	assert.Equal(t, http.StatusBadGateway, code)

	f.decided = nil
	for body, want := range map[string]int{
		`{"run":"run-a","decision":"reject","call_id":"c-1","args_digest":"d-c-1"}`:                                                 http.StatusBadRequest, // no reason
		`{"run":"run-a","decision":"approve","call_id":"c-1"}`:                                                                      http.StatusBadRequest, // no digest
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d","extra":1}`:                                          http.StatusBadRequest,
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d","edited_args":{"a":1,"a":2}}`:                        http.StatusBadRequest,
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d","note":"` + strings.Repeat("x", MaxBodyBytes) + `"}`: http.StatusRequestEntityTooLarge,
		`{"run":"run-a","decision":"respond","call_id":"c-1","args_digest":"d"}`:                                                    http.StatusBadRequest, // no response
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d","response":{"ok":true}}`:                             http.StatusBadRequest,
		`{"run":"run-a","decision":"respond","call_id":"c-1","args_digest":"d","response":1,"edited_args":{"a":1}}`:                 http.StatusBadRequest,
	} {
		code, out := post(t, srv, body, good(srv))
		assert.Equal(t, want, code, "%.120s: %v", body, out)
	}
	assert.Empty(t, f.decided)
	assert.Empty(t, f.responded)
}

// An answer in the tool's place is sent as the respond update, bound to the
// digest the page showed.
func TestRespondIsSentAsRespond(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	code, out := post(t, srv, `{"run":"run-a","decision":"respond","call_id":"c-1","args_digest":"d-c-1","kind":"interrupt","approver":"alice","response":{"rows":[]}}`, good(srv))
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, workflows.TraceResponded, out["decision"])
	assert.Empty(t, f.decided)
	require.Len(t, f.responded, 1)
	assert.Equal(t, "d-c-1", f.responded[0].ArgsDigest)
	assert.JSONEq(t, `{"rows":[]}`, string(f.responded[0].Response))
}

// A Host the inbox does not know (a DNS-rebinding page) is refused.
func TestUnknownHostIsRefused(t *testing.T) {
	srv := httptest.NewServer(New(newFake(), Options{Hosts: []string{"inbox.internal"}}))
	defer srv.Close()
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "inbox.internal:443": http.StatusOK, "localhost:1": http.StatusOK} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/pending", nil)
		require.NoError(t, err)
		req.Host = host
		req.Header.Set(Header, "1")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, host)
	}
}

// Edited arguments are checked against the tool's schema (as the run holds
// it) before anything is sent; ones that fit are sent as given.
func TestEditIsCheckedAgainstTheSchemaBeforeSending(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	edit := func(args string) string {
		return `{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d-c-1","kind":"gate","approver":"alice","edited_args":` + args + `}`
	}
	for _, bad := range []string{`{"ticket_id":"TKT-X"}`, `{"ticket":"TKT-4"}`, `{}`} {
		code, out := post(t, srv, edit(bad), good(srv))
		assert.Equal(t, http.StatusUnprocessableEntity, code, "%s: %v", bad, out)
		assert.Contains(t, out["error"], "do not fit close_ticket's schema (nothing was sent)", bad)
	}
	assert.Empty(t, f.decided, "nothing that breaks the schema is sent")
	code, out := post(t, srv, edit(`{"ticket_id":"TKT-4"}`), good(srv))
	assert.Equal(t, http.StatusOK, code, out)
	require.Len(t, f.decided, 1)
	assert.JSONEq(t, `{"ticket_id":"TKT-4"}`, string(f.decided[0].EditedArgs))
}

// The API answers the inbox page only. Another site's page could otherwise
// read every waiting call with the operator's browser: a cross-site fetch
// with credentials, a <script src> or <img> inclusion, or a top-level
// navigation. None of them can send the Header; a fetch that could (after a
// CORS preflight the inbox never answers) still says cross-site in
// Sec-Fetch-Site or Origin. Each refusal says why; the page's own request
// (same-origin, with the Header) is answered.
func TestAPIRefusesCrossSiteReads(t *testing.T) {
	srv := httptest.NewServer(New(newFake(), Options{}))
	defer srv.Close()
	cases := []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"a cross-site fetch with credentials", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Origin": "https://evil.example"}, "carries the X-Toolgate-Inbox header"},
		{"a <script src> inclusion", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script", "Sec-Fetch-Mode": "no-cors"}, "carries the X-Toolgate-Inbox header"},
		{"a typed or linked URL", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Dest": "document"}, "carries the X-Toolgate-Inbox header"},
		{"a client without the header", map[string]string{}, "carries the X-Toolgate-Inbox header"},
		{"the header, cross-site", map[string]string{Header: "1", "Sec-Fetch-Site": "cross-site"}, "cross-site request refused (Sec-Fetch-Site: cross-site)"},
		{"the header, same-site", map[string]string{Header: "1", "Sec-Fetch-Site": "same-site"}, "cross-site request refused (Sec-Fetch-Site: same-site)"},
		{"the header, another origin", map[string]string{Header: "1", "Origin": "https://evil.example"}, "does not match this inbox"},
	}
	for _, c := range cases {
		resp, body := getWith(t, srv, "/api/pending", c.hdr)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", c.name, body)
		var out struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &out), c.name)
		assert.Contains(t, out.Error, c.want, c.name)
		assert.NotContains(t, body, "run-a", "%s: no run data in a refusal", c.name)
	}
	resp, body := getWith(t, srv, "/api/pending", map[string]string{Header: "1", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the page's own fetch: %s", body)
	resp, body = getWith(t, srv, "/api/pending", map[string]string{Header: "1", "Origin": srv.URL})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the page's own fetch, with an Origin: %s", body)
	for _, path := range []string{"/", "/app.js"} {
		resp, _ := getWith(t, srv, path, map[string]string{"Sec-Fetch-Site": "none"})
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the page itself loads: %s", path)
	}
}

// The decision endpoint decodes as strictly as the run: a key in another
// case ("CALL_ID", which encoding/json would take for call_id), a key given
// twice (in any case), a misspelt key or data after the value is refused,
// saying why, and nothing is sent.
func TestDecideDecodesAsStrictlyAsTheRun(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	for body, want := range map[string]string{
		`{"run":"run-a","decision":"approve","CALL_ID":"c-1","args_digest":"d-c-1","kind":"gate"}`:                 `key "CALL_ID": the field is "call_id"`,
		`{"run":"run-a","decision":"approve","call_id":"c-9","Call_Id":"c-1","args_digest":"d-c-1","kind":"gate"}`: `key "Call_Id": the field is "call_id"`,
		`{"Run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d-c-1","kind":"gate"}`:                 `key "Run": the field is "run"`,
		`{"run":"run-a","decision":"approve","call_id":"c-9","call_id":"c-1","args_digest":"d-c-1","kind":"gate"}`: `duplicate key "call_id"`,
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digset":"d-c-1","kind":"gate"}`:                 `unknown field "args_digset"`,
		`{"run":"run-a","decision":"approve","call_id":"c-1","args_digest":"d-c-1","kind":"gate"} {"run":"run-b"}`: `trailing data after the value`,
	} {
		code, out := post(t, srv, body, good(srv))
		assert.Equal(t, http.StatusBadRequest, code, "%s: %v", body, out)
		assert.Contains(t, out["error"], want, body)
		assert.Contains(t, out["error"], "the decision does not decode", body)
	}
	assert.Empty(t, f.decided, "nothing refused reached the run")
}

// Arguments are served as exact canonical JSON text as well: an integer
// above 2^53 keeps every digit (a JavaScript double would round
// 12345678901234567893 to …892), in the call's arguments, the original ones,
// and the trace's arguments and results.
func TestArgumentsAreServedAsExactText(t *testing.T) {
	f := newFake()
	st := waiting("c-1", "refund", t0)
	st.Interrupts[0].CallArgs = json.RawMessage(`{ "amount_cents": 12345678901234567893, "rate": 1.50, "note": "\u202eevil" }`)
	st.Interrupts[0].OriginalArgs = json.RawMessage(`{"amount_cents":9007199254740993}`)
	f.states["run-a"] = st
	f.traces["run-a"] = []workflows.TraceRecord{{Seq: 1, CallID: "c-0", Tool: "lookup", Status: "ok",
		Args: json.RawMessage(`{"id":9007199254740993}`), Result: json.RawMessage(`{"balance":18446744073709551617}`)}}
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	l := list(t, srv, "?run=run-a")
	require.Len(t, l.Calls, 1)
	c := l.Calls[0]
	assert.Equal(t, `{"amount_cents":12345678901234567893,"note":"`+"\u202e"+`evil","rate":1.5}`, c.CallArgsText)
	assert.Equal(t, `{"amount_cents":9007199254740993}`, c.OriginalArgsText)
	require.Len(t, c.Trace, 1)
	assert.Equal(t, `{"id":9007199254740993}`, c.Trace[0].ArgsText)
	assert.Equal(t, `{"balance":18446744073709551617}`, c.Trace[0].ResultText)
}

func TestPendingNamesTheFleetsPauses(t *testing.T) {
	f := newFake()
	hostile := "<img src=x onerror=alert(1)>\u202e"
	f.views = map[string]ledger.View{
		"q1": {Pauses: []ledger.Pause{{Tool: "close_ticket", By: "ops-" + hostile, Reason: "incident 7 " + hostile + strings.Repeat("r", 2000), At: t0}}},
		"q3": {Pauses: []ledger.Pause{{Tool: ledger.AllTools, By: "oncall", Reason: "freeze", At: t0.Add(time.Minute)}}},
	}
	f.guardsErr = map[string]error{"q2": errors.New("reading the fleet ledger of task queue q2: context deadline exceeded")}
	srv := httptest.NewServer(New(f, Options{TaskQueues: []string{"q1", "q2", "q3", "q4"}}))
	defer srv.Close()

	resp, body := get(t, srv, "/api/pending")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.NotContains(t, body, "<img", "the JSON escapes markup: it is never HTML")
	var l List
	require.NoError(t, json.Unmarshal([]byte(body), &l))
	assert.NotEmpty(t, calls(l), "a ledger that does not answer costs the listing none of its calls")
	require.Len(t, l.Paused, 2, "q4's ledger never started: nothing paused there")
	p := l.Paused[0]
	assert.Equal(t, "q1", p.TaskQueue)
	assert.Equal(t, "close_ticket", p.Tool)
	assert.Equal(t, "ops-"+hostile, p.By, "by is data, passed as it is (the page shows it as text)")
	assert.True(t, strings.HasPrefix(p.Reason, "incident 7 "+hostile))
	assert.LessOrEqual(t, len(p.Reason), ledger.MaxReasonSize+len("…"), "the reason is bounded")
	assert.True(t, p.At.Equal(t0))
	assert.Equal(t, PausedTool{TaskQueue: "q3", Tool: ledger.AllTools, By: "oncall", Reason: "freeze", At: t0.Add(time.Minute)}, l.Paused[1])
	require.Len(t, l.PausedErrors, 1)
	assert.Contains(t, l.PausedErrors[0], "q2")
	assert.Contains(t, l.PausedErrors[0], "context deadline exceeded")
	assert.Equal(t, []string{"q1", "q2", "q3", "q4"}, f.guarded, "every served queue's ledger is read, and only theirs")
}

func TestPendingWithNoPausesListsEmptyArrays(t *testing.T) {
	f := newFake()
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	_, body := get(t, srv, "/api/pending")
	assert.Contains(t, body, `"paused":[]`)
	assert.Contains(t, body, `"paused_errors":[]`)
	assert.Equal(t, []string{workflows.TaskQueue}, f.guarded, "no queues given: the default queue's ledger")
}

func TestPausedErrorsAreBounded(t *testing.T) {
	f := newFake()
	f.guardsErr = map[string]error{}
	var queues []string
	for i := range MaxPausedErrors + 5 {
		q := fmt.Sprintf("q%d", i)
		queues = append(queues, q)
		f.guardsErr[q] = errors.New(strings.Repeat("x", 5000))
	}
	srv := httptest.NewServer(New(f, Options{TaskQueues: queues}))
	defer srv.Close()
	l := list(t, srv, "")
	require.Len(t, l.PausedErrors, MaxPausedErrors)
	for _, e := range l.PausedErrors {
		assert.LessOrEqual(t, len(e), maxPauseError+len("…"))
	}
}
