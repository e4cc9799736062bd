package confirm

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// decideCall is one Decide the fake was sent.
type decideCall struct {
	Run      string
	Approve  bool
	In       workflows.DecisionInput
	UpdateID string
}

// fake is a Backend over fixed states. It records every Decide and, as
// Temporal does with update ids, acts once per id: a second Decide under an
// id already taken returns the first one's result.
type fake struct {
	mu        sync.Mutex
	states    map[string]workflows.State
	decideErr error
	counted   bool // approvals count towards a quorum of 2
	requests  []decideCall
	acted     []decideCall
	results   map[string]workflows.DecisionResult
}

func (f *fake) State(_ context.Context, id string) (workflows.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[id]
	if !ok {
		return st, &client.Error{Kind: client.ErrUnknownRun, Msg: "no run with id " + id + " in this namespace"}
	}
	return st, nil
}

func (f *fake) Decide(_ context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	var uo sdkclient.UpdateWorkflowOptions
	for _, o := range opts {
		o(&uo)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	call := decideCall{Run: id, Approve: approve, In: in, UpdateID: uo.UpdateID}
	f.requests = append(f.requests, call)
	if f.decideErr != nil {
		return workflows.DecisionResult{}, f.decideErr
	}
	if res, ok := f.results[uo.UpdateID]; ok && uo.UpdateID != "" {
		return res, nil
	}
	f.acted = append(f.acted, call)
	res := workflows.DecisionResult{CallID: in.CallID, Decision: workflows.TraceRejected, Approver: in.Approver, ArgsDigest: in.ArgsDigest}
	if approve {
		res.Decision = workflows.TraceApproved
	}
	if approve && f.counted {
		res.Decision, res.ApprovedBy, res.Needed = workflows.DecisionCounted, []string{in.Approver}, 2
	}
	if in.Token != "" {
		if c, err := signed.Peek(in.Token); err == nil {
			res.Approver = c.Approver
		}
	}
	for _, it := range f.states[id].Interrupts {
		if it.CallID == in.CallID {
			res.Tool = it.Tool
		}
	}
	if f.results == nil {
		f.results = map[string]workflows.DecisionResult{}
	}
	f.results[uo.UpdateID] = res
	return res, nil
}

func (f *fake) calls() (requests, acted []decideCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]decideCall{}, f.requests...), append([]decideCall{}, f.acted...)
}

// posted is one request the fake response_url server got.
type posted struct {
	Path string
	Body map[string]any
	Raw  string
}

// fixture is a handler over a fake run "run-1" whose call c-3 (close_ticket)
// waits, a link key, approvers' keys, a Slack signing secret, and a server
// standing in for Slack's response_url.
type fixture struct {
	t        *testing.T
	f        *fake
	h        *Handler
	srv      *httptest.Server
	slackSrv *httptest.Server
	linkPub  ed25519.PublicKey
	linkKey  ed25519.PrivateKey
	viaPub   ed25519.PublicKey // signs decisions by link (Options.ViaKey): the policy's via_key
	viaKey   ed25519.PrivateKey
	keys     map[string]ed25519.PrivateKey
	now      time.Time
	it       workflows.Interrupt
	pol      *policy.Policy
	secret   string
	mu       sync.Mutex
	got      []posted
}

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// newFixture builds the fixture; underPolicy sets State.Policy and
// Options.Policy; edit adjusts the options before the handler is made.
func newFixture(t *testing.T, underPolicy bool, edit ...func(*Options)) *fixture {
	t.Helper()
	x := &fixture{t: t, keys: map[string]ed25519.PrivateKey{}, now: time.Now().Truncate(time.Second), secret: slackSecret}
	var err error
	if x.linkPub, x.linkKey, err = signed.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if x.viaPub, x.viaKey, err = signed.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	x.slackSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p := posted{Path: r.URL.Path, Raw: string(b)}
		_ = json.Unmarshal(b, &p.Body)
		x.mu.Lock()
		x.got = append(x.got, p)
		x.mu.Unlock()
	}))
	t.Cleanup(x.slackSrv.Close)
	args := json.RawMessage(`{"ticket":42,"comment":"<b>closing</b>"}`)
	digest, err := tool.Digest("close_ticket", args)
	if err != nil {
		t.Fatal(err)
	}
	x.it = workflows.Interrupt{CallID: "c-3", Tool: "close_ticket", CallArgs: args, ArgsDigest: digest, Kind: workflows.KindGate,
		Reason: "needs confirmation", RequestedAt: x.now.Add(-time.Minute).Add(123456789), ExpiresAt: x.now.Add(time.Hour)}
	x.f = &fake{states: map[string]workflows.State{"run-1": {Status: workflows.StatusWaitingForApproval,
		Interrupts: []workflows.Interrupt{x.it}, Policy: underPolicy}}}
	x.pol = &policy.Policy{Approvers: map[string]policy.Approver{}, ViaKey: signed.FormatPublicKey(x.viaPub)}
	for _, a := range []struct {
		name, slack string
		via         []string
	}{{"alice", "U1", []string{"email", "slack"}}, {"bob", "U2", nil}, {"carol", "U3", []string{"email"}}} {
		pub, priv, err := signed.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		x.keys[a.name] = priv
		x.pol.Approvers[a.name] = policy.Approver{Key: signed.FormatPublicKey(pub), Slack: a.slack, Email: a.name + "@example.com", Via: a.via}
	}
	nc := &notify.Config{Targets: []notify.Target{{Name: "slack", Slack: "https://hooks.slack.com/services/T0/B0/x",
		SigningSecret: slackSecret, ResponseURLPrefix: x.slackSrv.URL + "/hooks/"}}}
	nc.SetLinkKey(x.linkKey)
	opts := Options{Notify: nc, ViaKey: x.viaKey, Now: func() time.Time { return x.now }}
	if underPolicy {
		opts.Policy = x.pol
	}
	for _, e := range edit {
		e(&opts)
	}
	x.h = New(x.f, opts)
	x.srv = httptest.NewServer(x.h)
	t.Cleanup(x.srv.Close)
	return x
}

// link is a link token for c-3 sent to recipient by channel.
func (x *fixture) link(recipient, channel string) string {
	x.t.Helper()
	tok, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.UnixNano(),
		Recipient: recipient, Channel: channel, Expires: x.now.Add(time.Hour)}, x.now)
	if err != nil {
		x.t.Fatal(err)
	}
	return tok
}

// do sends a request to the handler and returns its status, headers and body.
func (x *fixture) do(method, path string, body url.Values, hdr map[string]string) (int, http.Header, string) {
	x.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, x.srv.URL+path, rd)
	if err != nil {
		x.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := x.srv.Client().Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// post posts the confirm form as the page does (same origin).
func (x *fixture) post(form url.Values) (int, string) {
	x.t.Helper()
	status, _, body := x.do(http.MethodPost, "/confirm", form, map[string]string{"Origin": x.srv.URL, "Sec-Fetch-Site": "same-origin"})
	return status, body
}

func (x *fixture) posts() []posted {
	x.h.Wait()
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]posted{}, x.got...)
}

// unesc is an HTML page's text with its entities decoded.
func unesc(s string) string { return html.UnescapeString(s) }

// mustNotDecide fails the test if anything was sent to Decide.
func (x *fixture) mustNotDecide(what string) {
	x.t.Helper()
	if req, _ := x.f.calls(); len(req) != 0 {
		x.t.Fatalf("%s: Decide was called %d times, want never: %+v", what, len(req), req)
	}
}
