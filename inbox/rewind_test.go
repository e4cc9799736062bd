package inbox

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/timeline"
)

type rewindCall struct {
	id, call, expect string
	by               client.Operator
}

type forkCall struct {
	src, at, newID string
	args           json.RawMessage
	by             client.Operator
}

// forkRun is the run a fork started (only its ids).
type forkRun struct {
	sdkclient.WorkflowRun
	id, runID string
}

func (r forkRun) GetID() string    { return r.id }
func (r forkRun) GetRunID() string { return r.runID }

const previewDigest = "5e1c8b0f6a7d4e3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6b5a"

func (f *fake) Steps(_ context.Context, id string) (*timeline.Timeline, error) {
	if f.timeline == nil || f.timeline.WorkflowID != id {
		return nil, &client.Error{Kind: client.ErrUnknownRun, Msg: "no run with id " + id}
	}
	return f.timeline, nil
}

func (f *fake) RewindPreview(_ context.Context, id, call string) (timeline.Preview, error) {
	if _, err := f.Steps(context.Background(), id); err != nil {
		return timeline.Preview{}, err
	}
	if call != f.preview.To {
		return timeline.Preview{}, &client.Error{Kind: client.ErrRefusedInput, Msg: "run " + id + " has no call " + call}
	}
	return f.preview, nil
}

// Rewind refuses a digest that is not the preview's, as client.Rewind does.
func (f *fake) Rewind(ctx context.Context, id, call, expect string, by client.Operator) (client.Rewound, error) {
	p, err := f.RewindPreview(ctx, id, call)
	if err != nil {
		return client.Rewound{}, err
	}
	if expect != p.Digest {
		return client.Rewound{Preview: p}, &client.Error{Kind: client.ErrStale, Msg: "run " + id + " moved on since the preview " + expect[:16] + "; nothing changed"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rewound = append(f.rewound, rewindCall{id, call, expect, by})
	return client.Rewound{Preview: p, RunID: "run-2"}, nil
}

func (f *fake) Fork(_ context.Context, src, at, newID string, args json.RawMessage, by client.Operator) (sdkclient.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forkErr != nil {
		return nil, f.forkErr
	}
	f.forked = append(f.forked, forkCall{src, at, newID, args, by})
	return forkRun{id: newID, runID: "fork-run-1"}, nil
}

func (f *fake) AwaitFork(context.Context, string, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forkRefused
}

// withTimeline gives run-a two steps: a read, then a close and a refund.
func withTimeline(f *fake) *fake {
	refund := timeline.Call{ID: "c-3", Tool: "refund", Args: json.RawMessage(`{"booking_id":"BK-1","amount_cents":12345678901234567893}`),
		Destructive: true, Status: "ok", Decision: "approved", Approver: "alice", Result: json.RawMessage(`{"payment_id":"<b>P-1</b>"}`), Ran: true}
	f.timeline = &timeline.Timeline{WorkflowID: "run-a", Runs: []timeline.Run{{RunID: "run-1", Status: "Completed"}}, LastEvent: 40, Steps: []timeline.Step{
		{Step: 1, Turn: 1, RunID: "run-1", ResetEvent: 4, Calls: []timeline.Call{{ID: "c-1", Tool: "search_tickets", Args: json.RawMessage(`{"query":"x"}`), Status: "ok", Ran: true}}},
		{Step: 2, Turn: 1, RunID: "run-1", ResetEvent: 12, Calls: []timeline.Call{
			{ID: "c-2", Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-3"}`), Destructive: true, Status: "ok", Decision: "approved", Approver: "alice", Ran: true},
			refund}},
	}}
	f.preview = timeline.Preview{WorkflowID: "run-a", To: "c-3", Tool: "refund", Step: 2, BaseRunID: "run-1", ResetEvent: 12, CurrentRunID: "run-1",
		LastEvent: 40, Redo: []string{"c-2", "c-3"}, Kept: []timeline.Call{refund}, Dropped: []timeline.Call{refund}, Messages: 1, Digest: previewDigest}
	return f
}

func postTo(t *testing.T, srv *httptest.Server, path, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The steps of a run are served with each call's arguments and result as
// exact text (an integer past 2^53 intact, markup only as JSON data), and
// whether the run is under a policy.
func TestStepsAreServedWithExactText(t *testing.T) {
	f := withTimeline(newFake())
	st := f.states["run-a"]
	st.Policy = true
	f.states["run-a"] = st
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	resp, body := get(t, srv, "/api/steps?run=run-a")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.NotContains(t, body, "<b>", "markup is escaped in the JSON text")
	var s Steps
	require.NoError(t, json.Unmarshal([]byte(body), &s))
	assert.True(t, s.Policy)
	require.Len(t, s.Steps, 2)
	require.Len(t, s.Steps[1].Calls, 2)
	c := s.Steps[1].Calls[1]
	assert.Equal(t, "c-3", c.ID)
	assert.Equal(t, "alice", c.Approver)
	assert.Equal(t, `{"amount_cents":12345678901234567893,"booking_id":"BK-1"}`, c.ArgsText)
	assert.Equal(t, `{"payment_id":"<b>P-1</b>"}`, c.ResultText)
	assert.EqualValues(t, 12, s.Steps[1].ResetEvent)

	resp, body = get(t, srv, "/api/steps?run=nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	resp, body = get(t, srv, "/api/steps")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.Contains(t, body, "run is missing")
}

// A preview is served with its digest and what stays, is dropped and runs
// again; a call the run does not have is refused, saying why.
func TestRewindPreviewIsServed(t *testing.T) {
	srv := httptest.NewServer(New(withTimeline(newFake()), Options{}))
	defer srv.Close()
	resp, body := get(t, srv, "/api/rewind-preview?run=run-a&to=c-3")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var p PreviewView
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	assert.Equal(t, previewDigest, p.Digest)
	assert.Equal(t, []string{"c-2", "c-3"}, p.Redo)
	require.Len(t, p.Kept, 1)
	assert.Equal(t, `{"payment_id":"<b>P-1</b>"}`, p.Kept[0].ResultText)
	assert.Equal(t, 1, p.Messages)

	resp, body = get(t, srv, "/api/rewind-preview?run=run-a&to=c-9")
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	assert.Contains(t, body, "has no call c-9")
	for _, q := range []string{"?run=run-a", "?run=run-a&to=c-1%3Cx", "?to=c-3"} {
		resp, body = get(t, srv, "/api/rewind-preview"+q)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", q, body)
	}
}

const rewindC3 = `{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"olga"}`

// A rewind bound to the preview's digest is done, as the operator who sent
// it, with the token signed in the page passed through as it is; a stale
// digest is a 409 that says why, and nothing is done.
func TestRewindIsBoundToThePreviewsDigest(t *testing.T) {
	f := withTimeline(newFake())
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	stale := strings.Replace(rewindC3, previewDigest, strings.Repeat("0", 64), 1)
	code, out := postTo(t, srv, "/api/rewind", stale, good(srv))
	assert.Equal(t, http.StatusConflict, code, out)
	assert.Equal(t, true, out["stale"])
	assert.Contains(t, out["error"], "moved on since the preview 0000000000000000; nothing changed")
	assert.Empty(t, f.rewound, "a stale rewind does nothing")

	code, out = postTo(t, srv, "/api/rewind", rewindC3, good(srv))
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, "run-2", out["run_id"])
	signedC3 := strings.Replace(rewindC3, `}`, `,"token":"h.p.s"}`, 1)
	code, out = postTo(t, srv, "/api/rewind", signedC3, good(srv))
	require.Equal(t, http.StatusOK, code, out)
	require.Len(t, f.rewound, 2)
	assert.Equal(t, rewindCall{"run-a", "c-3", previewDigest, client.Operator{Name: "olga"}}, f.rewound[0])
	assert.Equal(t, client.Operator{Name: "olga", Token: "h.p.s"}, f.rewound[1].by, "the page's token, as it is")
}

// Only a same-origin JSON POST with the inbox's header rewinds or forks; a
// GET of either never acts, nor does a GET of the steps or the preview; a
// body that does not decode strictly, or lacks what it must bind to, is
// refused, saying why, before anything is done.
func TestRewindAndForkRefuseHostileInput(t *testing.T) {
	f := withTimeline(newFake())
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	const forkC3 = `{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga"}`
	for _, path := range []string{"/api/rewind", "/api/fork"} {
		body := rewindC3
		if path == "/api/fork" {
			body = forkC3
		}
		for name, hdr := range map[string]map[string]string{
			"cross-origin":     {"Content-Type": "application/json", Header: "1", "Origin": "https://evil.example"},
			"no origin":        {"Content-Type": "application/json", Header: "1"},
			"text/plain":       {"Content-Type": "text/plain", Header: "1", "Origin": srv.URL},
			"form":             {"Content-Type": "application/x-www-form-urlencoded", Header: "1", "Origin": srv.URL},
			"no header":        {"Content-Type": "application/json", "Origin": srv.URL},
			"cross-site fetch": {"Content-Type": "application/json", Header: "1", "Origin": srv.URL, "Sec-Fetch-Site": "cross-site"},
		} {
			code, out := postTo(t, srv, path, body, hdr)
			assert.Contains(t, []int{http.StatusForbidden, http.StatusUnsupportedMediaType}, code, "%s %s: %v", path, name, out)
			assert.NotEmpty(t, out["error"], "%s %s: a refusal says why", path, name)
		}
		resp, _ := get(t, srv, path+"?run=run-a&to=c-3&at=c-3&id=x&expect="+previewDigest+"&operator=olga")
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "GET %s", path)
	}
	get(t, srv, "/api/steps?run=run-a")
	get(t, srv, "/api/rewind-preview?run=run-a&to=c-3")

	for body, want := range map[string]string{
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"olga","extra":1}`:                   `unknown field "extra"`,
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"olga","TO":"c-1"}`:                  `key "TO": the field is "to"`,
		`{"run":"run-a","to":"c-3","to":"c-1","expect":"` + previewDigest + `","operator":"olga"}`:                  `duplicate key "to"`,
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"olga"} {}`:                          `trailing data`,
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"olga"`:                              `does not decode`,
		`{"run":"run-a","to":"c-3","operator":"olga"}`:                                                              `bound to the digest of the preview`,
		`{"run":"run-a","to":"c-3","expect":"` + strings.ToUpper(previewDigest) + `","operator":"olga"}`:            `bound to the digest of the preview`,
		`{"run":"run-a","to":"3","expect":"` + previewDigest + `","operator":"olga"}`:                               `want the call to rewind to`,
		`{"run":"","to":"c-3","expect":"` + previewDigest + `","operator":"olga"}`:                                  `run is missing`,
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `"}`:                                               `operator is missing`,
		`{"run":"run-a","to":"c-3","expect":"` + previewDigest + `","operator":"` + strings.Repeat("o", 129) + `"}`: `at most 128`,
	} {
		code, out := postTo(t, srv, "/api/rewind", body, good(srv))
		assert.Equal(t, http.StatusBadRequest, code, "%s: %v", body, out)
		assert.Contains(t, out["error"], want, body)
	}
	code, out := postTo(t, srv, "/api/rewind", `{"run":"run-a","to":"c-3","expect":"`+previewDigest+`","operator":"`+strings.Repeat("o", MaxBodyBytes)+`"}`, good(srv))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, out)

	for body, want := range map[string]string{
		`{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga","args":{"a":1,"a":2}}`: `duplicate key`,
		`{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga","args":[1]}`:           `args: the fork's arguments are a JSON object`,
		`{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga","ARGS":{}}`:            `key "ARGS": the field is "args"`,
		`{"run":"run-a","at":"c-3","id":"run-a","operator":"olga"}`:                           `an id of its own`,
		`{"run":"run-a","at":"c-3","operator":"olga"}`:                                        `id is missing`,
		`{"run":"run-a","at":"x","id":"run-a-fork","operator":"olga"}`:                        `want the call to fork at`,
		`{"run":"run-a","at":"c-3","id":"run-a-fork"}`:                                        `operator is missing`,
	} {
		code, out := postTo(t, srv, "/api/fork", body, good(srv))
		assert.Equal(t, http.StatusBadRequest, code, "%s: %v", body, out)
		assert.Contains(t, out["error"], want, body)
	}
	assert.Empty(t, f.rewound, "nothing refused, and no GET, rewound the run")
	assert.Empty(t, f.forked, "nothing refused, and no GET, forked the run")
}

// A fork is started as asked, its arguments exactly as sent and the page's
// token passed through; a refusal of the client keeps its status.
func TestForkIsStartedAsAsked(t *testing.T) {
	f := withTimeline(newFake())
	srv := httptest.NewServer(New(f, Options{}))
	defer srv.Close()
	code, out := postTo(t, srv, "/api/fork", `{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga","token":"h.p.s","args":{"booking_id":"BK-1","amount_cents":9007199254740993}}`, good(srv))
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, map[string]any{"id": "run-a-fork", "run_id": "fork-run-1"}, out)
	require.Len(t, f.forked, 1)
	fc := f.forked[0]
	assert.Equal(t, []string{"run-a", "c-3", "run-a-fork"}, []string{fc.src, fc.at, fc.newID})
	assert.Equal(t, `{"booking_id":"BK-1","amount_cents":9007199254740993}`, string(fc.args), "exactly as sent")
	assert.Equal(t, client.Operator{Name: "olga", Token: "h.p.s"}, fc.by)

	f.forkErr = &client.Error{Kind: client.ErrRefusedInput, Msg: "a run with id run-a-fork is already running"}
	code, out = postTo(t, srv, "/api/fork", `{"run":"run-a","at":"c-3","id":"run-a-fork","operator":"olga"}`, good(srv))
	assert.Equal(t, http.StatusUnprocessableEntity, code, out)
	assert.Contains(t, out["error"], "already running")

	// Started, and refused by the run in its first task: the page is told so.
	f.forkErr, f.forkRefused = nil, &client.Error{Kind: client.ErrRefusedInput, Msg: "fork refused: olga holds [support]; rewinding or forking a run needs one of the operators' roles [sre]"}
	code, out = postTo(t, srv, "/api/fork", `{"run":"run-a","at":"c-3","id":"run-a-fork-2","operator":"olga","token":"h.p.s"}`, good(srv))
	assert.Equal(t, http.StatusUnprocessableEntity, code, out)
	assert.Contains(t, out["error"], "fork refused: olga holds [support]")
}
