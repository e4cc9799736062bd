package agui

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// signingFake is deskFake whose runs are held to a policy: a start's
// request_token is verified against pub, as the run does, and its signer
// becomes the run's requester; an unsigned start has none.
func signingFake(t *testing.T, pub ed25519.PublicKey) *fake {
	t.Helper()
	f, _ := deskFake()
	script := f.onStart
	f.onStart = func(r *fakeRun) {
		script(r)
		r.st.Policy = true
		in := f.starts[len(f.starts)-1]
		if in.RequestToken == "" {
			return
		}
		c, err := signed.Verify(in.RequestToken, pub)
		if err != nil {
			t.Errorf("the start's token does not verify: %v", err)
			return
		}
		unsigned := in
		unsigned.RequestToken = ""
		raw, _ := json.Marshal(unsigned)
		if d, err := workflows.InputDigest(raw); err != nil || c.InputDigest != d || c.Action != signed.ActionStart || c.WorkflowID != WorkflowID("t1") {
			t.Errorf("the start's token signs %+v, not this start (input digest %s, %v)", c, d, err)
			return
		}
		r.st.RequestedBy = c.Approver
	}
	return f
}

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// Under a policy the endpoint starts a thread's run signed by its caller
// (the run's verified requester: their start token over the whole input),
// and only that caller sends the thread messages: another caller's is
// refused and reaches nothing, while their reconnect streams the turn.
func TestUnderAPolicyAThreadStartsSignedByItsCaller(t *testing.T) {
	pub, key := newKey(t)
	f := signingFake(t, pub)
	h := newHandler(t, f, callers("alice", key), func(o *Options) { o.Policy = true })
	alice := asCaller(h, callerToken)
	first := firstTurn(t, alice)
	if o, _ := last(first)["outcome"].(map[string]any); o["type"] != "interrupt" {
		t.Fatalf("alice's first turn: %s %v", types(first), last(first))
	}
	if len(f.starts) != 1 || f.starts[0].RequestToken == "" || f.runs[WorkflowID("t1")].st.RequestedBy != "alice" {
		t.Fatalf("starts %+v: want one, signed by alice", f.starts)
	}

	bob := asCaller(newHandler(t, f, func(o *Options) {
		o.Policy = true
		o.Callers = func(string) (Caller, bool) { return Caller{Name: "bob"}, true }
	}), "tg_bob")
	msgs := snapshotMessages(t, first)
	evs := events(t, post(t, bob, input("t1", append(msgs, userMsg("u2", "close another one")))))
	if types(evs) != "RUN_ERROR" || last(evs).str("code") != "foreign_thread" || !strings.Contains(last(evs).str("message"), "requested by alice") {
		t.Errorf("bob's message on alice's thread: %s %v", types(evs), last(evs))
	}
	if len(f.messages)+len(f.decisions) != 0 || len(f.starts) != 1 {
		t.Fatalf("bob's message reached alice's run: %v %v %v", f.starts, f.messages, f.decisions)
	}
	if evs := events(t, post(t, bob, input("t1", msgs))); last(evs).str("type") != "RUN_FINISHED" {
		t.Errorf("bob's reconnect to alice's thread: %s %v", types(evs), last(evs))
	}
}

// Under a policy a start no caller can sign is refused, saying how to give
// callers keys, and nothing starts: an endpoint without callers, a caller
// without a key. With callers, a request without one of their tokens is a
// 401.
func TestUnderAPolicyAStartNoCallerSignsIsRefused(t *testing.T) {
	pub, _ := newKey(t)
	for _, c := range []struct {
		name  string
		opts  func(*Options)
		token string
		want  string
	}{
		{"no callers", func(*Options) {}, "", "this endpoint does not know who calls it"},
		{"a caller without a key", callers("alice", nil), callerToken, "caller alice has no signing key here"},
	} {
		f := signingFake(t, pub)
		h := newHandler(t, f, c.opts, func(o *Options) { o.Policy = true })
		evs := firstTurn(t, asCaller(h, c.token))
		if types(evs) != "RUN_ERROR" || last(evs).str("code") != "unsigned_start" || !strings.Contains(last(evs).str("message"), c.want) ||
			!strings.Contains(last(evs).str("message"), "toolgate mcp token new NAME --key NAME.key --tokens FILE") {
			t.Errorf("%s: %s %v", c.name, types(evs), last(evs))
		}
		if len(f.starts) != 0 {
			t.Errorf("%s: started %+v", c.name, f.starts)
		}
	}

	f := signingFake(t, pub)
	h := newHandler(t, f, callers("alice", nil))
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer tg_other"}, {"Authorization", "Basic " + callerToken}} {
		rec := post(t, h, input("t1", []json.RawMessage{userMsg("u1", goal)}), hdr...)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %v: %d %q, want 401", hdr, rec.Code, rec.Body.String())
		}
	}
	if len(f.starts) != 0 {
		t.Fatalf("an unauthenticated request started %+v", f.starts)
	}
}

// A thread's run held to a policy but with no verified requester — the
// endpoint was not told of the worker's policy and started it unsigned —
// is refused as soon as it shows, and from then on (a reconnect too).
func TestARunUnderAPolicyWithoutARequesterIsRefused(t *testing.T) {
	pub, _ := newKey(t)
	f := signingFake(t, pub)
	h := newHandler(t, f) // not told of the policy
	evs := firstTurn(t, h)
	if types(evs) != "RUN_STARTED RUN_ERROR" || last(evs).str("code") != "no_requester" {
		t.Fatalf("an unsigned start under a policy: %s %v", types(evs), last(evs))
	}
	if evs = events(t, post(t, h, input("t1", nil))); types(evs) != "RUN_ERROR" || last(evs).str("code") != "no_requester" {
		t.Fatalf("a reconnect: %s %v", types(evs), last(evs))
	}
}

// A start the run refuses (it closes at once) ends the stream with why,
// from the run's failure.
func TestAStartTheRunRefusesSaysWhy(t *testing.T) {
	_, key := newKey(t)
	f, _ := deskFake()
	f.onStart = func(r *fakeRun) {
		r.info.Running, r.info.Failure = false, `request_token refused: unknown approver "alice"`
	}
	// MaxStream bounds a stream that would follow the closed run instead.
	h := newHandler(t, f, callers("alice", key), func(o *Options) { o.Policy, o.MaxStream = true, 5*time.Second })
	evs := firstTurn(t, asCaller(h, callerToken))
	if types(evs) != "RUN_STARTED RUN_ERROR" || last(evs).str("code") != "run_closed" || !strings.Contains(last(evs).str("message"), `unknown approver "alice"`) {
		t.Fatalf("%s %v", types(evs), last(evs))
	}
}
