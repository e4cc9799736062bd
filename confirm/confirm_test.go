package confirm

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

var wantHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
}

// A GET (a HEAD, a mail scanner's GET) renders the call's card — escaped —
// and a form that posts the decision, under the security headers, and never
// decides.
func TestGetShowsTheCardAndNeverDecides(t *testing.T) {
	x := newFixture(t, false)
	tok := x.link("alice", notify.ViaEmail)
	status, hdr, body := x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(tok), nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	for k, v := range wantHeaders {
		assert.Equal(t, v, hdr.Get(k), k)
	}
	for _, want := range []string{"close_ticket", "run-1", "c-3", x.it.ArgsDigest, "needs confirmation", `&#34;ticket&#34;: 42`,
		"&lt;b&gt;closing&lt;/b&gt;", `action="/confirm"`, `name="t" value="` + tok + `"`, `value="approve"`, `value="reject"`,
		`name="reason"`, "You decide as alice", x.it.ExpiresAt.UTC().Format(time.RFC3339)} {
		assert.Contains(t, body, want)
	}
	assert.NotContains(t, body, "<b>closing", "run data is escaped")
	assert.NotContains(t, body, "keyfile", "no policy: no key to load")
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
		assert.Regexp(t, `src="/(sign|confirm)\.js"`, tag, "only script files, no inline script")
	}
	status, _, _ = x.do(http.MethodHead, "/confirm?t="+url.QueryEscape(tok), nil, nil)
	assert.Equal(t, http.StatusOK, status, "HEAD")
	status, _, _ = x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(tok), nil,
		map[string]string{"User-Agent": "Mozilla/5.0 (compatible; SafeLinks; Barracuda Sentinel)", "Sec-Fetch-Site": "none"})
	assert.Equal(t, http.StatusOK, status, "a scanner's GET")
	x.mustNotDecide("GET and HEAD")
	for _, p := range []string{"/sign.js", "/confirm.js", "/confirm.css"} {
		status, hdr, js := x.do(http.MethodGet, p, nil, nil)
		assert.Equal(t, http.StatusOK, status, p)
		assert.Equal(t, wantHeaders["Content-Security-Policy"], hdr.Get("Content-Security-Policy"), p)
		assert.NotContains(t, js, "innerHTML", p)
	}
}

// Links that cannot be used, and calls that do not wait with the link's
// arguments, are refused by GET and POST alike, with a status and a page
// that say why; nothing is decided.
func TestRefusedLinks(t *testing.T) {
	x := newFixture(t, false)
	good := x.link("alice", notify.ViaEmail)
	expired, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(-time.Minute)}, x.now.Add(-time.Hour))
	require.NoError(t, err)
	_, otherKey, _ := signed.GenerateKey()
	foreign, err := notify.SignLink(otherKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(time.Hour)}, x.now)
	require.NoError(t, err)
	mid := strings.LastIndexByte(good, '.') + 10
	flip := byte('A')
	if good[mid] == 'A' {
		flip = 'B'
	}
	tampered := good[:mid] + string(flip) + good[mid+1:]
	otherArgs, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: strings.Repeat("0", 64), Asked: x.it.RequestedAt.UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(time.Hour)}, x.now)
	require.NoError(t, err)
	decided, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-1", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(time.Hour)}, x.now)
	require.NoError(t, err)
	unknown, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-9", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(time.Hour)}, x.now)
	require.NoError(t, err)
	earlierWait, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: x.it.RequestedAt.Add(-time.Hour).UnixNano(),
		Recipient: "alice", Channel: "email", Expires: x.now.Add(time.Hour)}, x.now)
	require.NoError(t, err)
	cases := []struct {
		name, tok string
		status    int
		want      string
	}{
		{"expired", expired, http.StatusGone, "expired"},
		{"tampered", tampered, http.StatusBadRequest, "not valid"},
		{"another key", foreign, http.StatusBadRequest, "not signed by this listener"},
		{"no token", "", http.StatusBadRequest, "no link token"},
		{"other arguments", otherArgs, http.StatusConflict, "changed since this link was sent"},
		{"already decided", decided, http.StatusConflict, "already decided"},
		{"unknown run", unknown, http.StatusNotFound, "unknown run"},
		{"an earlier wait of the call (a rewind)", earlierWait, http.StatusConflict, "waits again since this link was sent"},
	}
	for _, c := range cases {
		status, hdr, body := x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(c.tok), nil, nil)
		assert.Equal(t, c.status, status, "GET %s: %s", c.name, body)
		assert.Contains(t, unesc(body), c.want, "GET %s", c.name)
		assert.Contains(t, unesc(body), "nothing was decided", "GET %s", c.name)
		assert.NotContains(t, body, "<form", "GET %s: no form", c.name)
		assert.Equal(t, "no-referrer", hdr.Get("Referrer-Policy"), c.name)
		status, body = x.post(url.Values{"t": {c.tok}, "decision": {"approve"}})
		assert.Equal(t, c.status, status, "POST %s: %s", c.name, body)
		assert.Contains(t, unesc(body), c.want, "POST %s", c.name)
	}
	status, _, body := x.do(http.MethodGet, "/confirm?t="+url.QueryEscape(good), nil, map[string]string{"Host": "evil.example"})
	assert.Equal(t, http.StatusMisdirectedRequest, status, "an unknown host: %s", body)
	x.mustNotDecide("refused links")
}

// A POST approves once, as the link's recipient via its channel, bound to
// the link's args_digest; the same POST again is the same update (one act).
func TestPostDecidesOnceByTheLink(t *testing.T) {
	x := newFixture(t, false)
	tok := x.link("alice", notify.ViaEmail)
	form := url.Values{"t": {tok}, "decision": {"approve"}, "reason": {"looks right"}}
	for range 2 {
		status, body := x.post(form)
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, "approved c-3 (close_ticket) as alice via email")
	}
	req, acted := x.f.calls()
	require.Len(t, req, 2)
	require.Len(t, acted, 1, "the same POST twice acts once")
	assert.Equal(t, req[0].UpdateID, req[1].UpdateID)
	assert.True(t, strings.HasPrefix(req[0].UpdateID, "link-"), req[0].UpdateID)
	assert.Equal(t, "run-1", acted[0].Run)
	assert.True(t, acted[0].Approve)
	assert.Equal(t, workflows.DecisionInput{CallID: "c-3", Approver: "alice", Via: "email", Note: "looks right",
		ArgsDigest: x.it.ArgsDigest, Kind: workflows.KindGate}, acted[0].In)

	// A rejection is another update; it needs a reason.
	status, body := x.post(url.Values{"t": {tok}, "decision": {"reject"}})
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "a rejection needs a reason")
	status, body = x.post(url.Values{"t": {tok}, "decision": {"reject"}, "reason": {"wrong ticket"}})
	require.Equal(t, http.StatusOK, status, body)
	req, _ = x.f.calls()
	require.Len(t, req, 3)
	assert.NotEqual(t, req[0].UpdateID, req[2].UpdateID)
	assert.Equal(t, "wrong ticket", req[2].In.Reason)
	assert.False(t, req[2].Approve)
}

// A webhook's link names its target, not a person: with no policy the
// decision is recorded as the target's, through the webhook; under a policy
// it needs the approver's signature.
func TestWebhookLinks(t *testing.T) {
	x := newFixture(t, false)
	status, body := x.post(url.Values{"t": {x.link("ops", notify.ViaWebhook)}, "decision": {"approve"}})
	require.Equal(t, http.StatusOK, status, body)
	_, acted := x.f.calls()
	require.Len(t, acted, 1)
	assert.Equal(t, "webhook:ops", acted[0].In.Approver)
	assert.Equal(t, "webhook", acted[0].In.Via)

	p := newFixture(t, true)
	status, body = p.post(url.Values{"t": {p.link("ops", notify.ViaWebhook)}, "decision": {"approve"}})
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Contains(t, body, "sign the decision with your key")
	p.mustNotDecide("an unsigned decision by a webhook's link under a policy")
}

// A form another site posts is refused before anything is read of the run.
func TestPostRefusesCrossSiteForms(t *testing.T) {
	x := newFixture(t, false)
	form := url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want string
	}{
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, "is not this page's"},
		{"foreign origin, same-origin fetch", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"}, "is not this page's"},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, "cross-site form refused"},
		{"same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": x.srv.URL}, "cross-site form refused"},
		{"null origin alone", map[string]string{"Origin": "null"}, "is not this page's"},
	} {
		status, _, body := x.do(http.MethodPost, "/confirm", form, c.hdr)
		assert.Equal(t, http.StatusForbidden, status, "%s: %s", c.name, body)
		assert.Contains(t, unesc(body), c.want, c.name)
		assert.Contains(t, unesc(body), "nothing was decided", c.name)
	}
	x.mustNotDecide("cross-site forms")
	// The page's own form under Referrer-Policy: no-referrer has Origin: null
	// and Sec-Fetch-Site: same-origin; without either header (an old browser, curl) it passes too.
	status, _, body := x.do(http.MethodPost, "/confirm", form, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"})
	assert.Equal(t, http.StatusOK, status, body)
	status, _, body = x.do(http.MethodPost, "/confirm", form, nil)
	assert.Equal(t, http.StatusOK, status, body)
}

// The run's refusal is shown, escaped, with a status that says what it is.
func TestPostShowsTheRunsRefusal(t *testing.T) {
	x := newFixture(t, false)
	x.f.decideErr = &client.Error{Kind: client.ErrAlreadyDecided, Msg: "call c-3 is not waiting <script>x</script>"}
	status, body := x.post(url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}})
	assert.Equal(t, http.StatusConflict, status, body)
	assert.Contains(t, body, "refused: approve c-3 of run run-1: call c-3 is not waiting &lt;script&gt;x&lt;/script&gt;")
	assert.NotContains(t, body, "<script>x")

	x.f.decideErr = &client.Error{Kind: client.ErrRunClosed, Msg: "run run-1 has completed (closed at 2026-01-02T03:04:05Z): it takes no more decisions"}
	status, body = x.post(url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}})
	assert.Equal(t, http.StatusConflict, status, body)
	assert.Contains(t, body, "run run-1 has completed (closed at 2026-01-02T03:04:05Z): it takes no more decisions")
}

// The form is form-encoded and at most MaxBodyBytes.
func TestPostTakesOnlyTheForm(t *testing.T) {
	x := newFixture(t, false)
	form := url.Values{"t": {x.link("alice", notify.ViaEmail)}, "decision": {"approve"}}
	req, _ := http.NewRequest(http.MethodPost, x.srv.URL+"/confirm", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := x.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	form.Set("reason", strings.Repeat("x", MaxBodyBytes))
	status, body := x.post(form)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	form.Set("reason", strings.Repeat("x", MaxReasonBytes+1))
	status, body = x.post(form)
	assert.Equal(t, http.StatusBadRequest, status, body)
	form.Set("reason", "")
	form.Add("decision", "reject")
	status, body = x.post(form)
	assert.Equal(t, http.StatusBadRequest, status, "two decisions: %s", body)
	x.mustNotDecide("forms refused")
}
