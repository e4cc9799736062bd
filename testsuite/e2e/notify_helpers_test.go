package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/confirm"
	"github.com/toolgate/toolgate/internal/smtptest"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The notifications' rig: every target toolgate notifies, local — a webhook
// receiver, a fake Slack (its incoming webhook and the response_url a
// click's message is updated through), a mail server — and the inbox
// listener's confirm handler that takes the links and the clicks back.

const (
	hookSecret    = "hook-secret-e2e"
	slackSecret   = "slack-signing-secret-e2e"
	smtpUser      = "toolgate"
	smtpPassword  = "smtp-password-e2e"
	opsMail       = "ops@example.com"
	notifyTimeout = 45 * time.Second // a delivery (retries included) reaching its target
)

// request is one HTTP request a fake took.
type request struct {
	header http.Header
	body   []byte
	path   string
}

// recorder is an HTTP fake that records what it takes and answers status.
type recorder struct {
	mu     sync.Mutex
	got    []request
	status int
	held   chan struct{} // hold: requests wait until it is closed
	srv    *httptest.Server
}

// hold makes the recorder's requests wait, once recorded, until release is
// called (or the test ends): a delivery to it stays in flight.
func (r *recorder) hold(t *testing.T) (release func()) {
	r.mu.Lock()
	r.held = make(chan struct{})
	held := r.held
	r.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return release
}

func newRecorder(t *testing.T, status int) *recorder {
	r := &recorder{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.got = append(r.got, request{header: req.Header.Clone(), body: body, path: req.URL.Path})
		status, held := r.status, r.held
		r.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-req.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests(path string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.got {
		if path == "" || q.path == path {
			out = append(out, q)
		}
	}
	return out
}

// notifyRig is the targets, the confirm handler, and the notify file over them.
type notifyRig struct {
	t       *testing.T
	hook    *recorder
	slack   *recorder // /incoming: messages; /respond: a click's message updates
	mail    *smtptest.Server
	door    *httptest.Server
	cfg     *notify.Config
	linkKey ed25519.PrivateKey
	keyFile string             // linkKey's file
	viaKey  ed25519.PrivateKey // the listener's: signs decisions by link
	handler http.Handler
	cf      *confirm.Handler
	bare    *httptest.Server // a listener over the same client that reads no link record (bareConfirmPost)
}

// waitForReplies waits until the confirm handler's posts to Slack's
// response_url have been made.
func (r *notifyRig) waitForReplies() {
	if r.cf != nil {
		r.cf.Wait()
	}
}

// newNotifyRig makes the rig; extra is YAML added to every target list
// (more targets), events the file's events.
func newNotifyRig(t *testing.T, extra string) *notifyRig {
	r := &notifyRig{t: t, hook: newRecorder(t, http.StatusOK), slack: newRecorder(t, http.StatusOK),
		mail: smtptest.Start(t, smtptest.Options{User: smtpUser, Password: smtpPassword})}
	r.door = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.handler.ServeHTTP(w, req) }))
	t.Cleanup(r.door.Close)
	_, priv, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r.linkKey, r.keyFile = priv, filepath.Join(t.TempDir(), "link.key")
	if _, r.viaKey, err = signed.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if err := signed.WritePrivateKey(r.keyFile, priv); err != nil {
		t.Fatal(err)
	}
	r.cfg = r.parse(fmt.Sprintf(`
targets:
  - {name: ops, webhook: "%s/hook", secret: "${HOOK_SECRET}"}
  - {name: team, slack: "%s/incoming", signing_secret: "${SLACK_SECRET}", response_url_prefix: "%s/respond"}
  - {name: mail, smtp: "%s", from: "toolgate@example.com", user: %s, password: "${SMTP_PASSWORD}", to: [%s], ca_file: "%s"}
%s
link_base: "%s"
link_key_file: "%s"
`, r.hook.srv.URL, r.slack.srv.URL, r.slack.srv.URL, r.mail.Addr(), smtpUser, opsMail, r.mail.CAFile(), extra, r.door.URL, r.keyFile))
	return r
}

// parse reads a notify file with the rig's secrets, and sets its link key.
func (r *notifyRig) parse(text string) *notify.Config {
	r.t.Helper()
	env := map[string]string{"HOOK_SECRET": hookSecret, "SLACK_SECRET": slackSecret, "SMTP_PASSWORD": smtpPassword}
	cfg, err := notify.Parse([]byte(text), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		r.t.Fatalf("notify file: %v\n%s", err, text)
	}
	cfg.SetLinkKey(r.linkKey)
	return cfg
}

// serve starts a worker on s that notifies through the rig (under pol, if
// set) and serves the confirm handler over s's client, as the inbox
// listener of `toolgate dev --notify` does.
func (r *notifyRig) serve(s *stack, pol *policy.Policy) *inWorker {
	r.t.Helper()
	w := s.startWorkerWith(func(o *worker.Options) { o.Notify, o.Policy = notify.NewSender(r.cfg), pol })
	r.cf = confirm.New(s.tg, confirm.Options{Notify: r.cfg, Policy: pol, ViaKey: r.viaKey})
	r.handler = r.cf
	r.bare = httptest.NewServer(confirm.New(runOnly{s.tg}, confirm.Options{Notify: r.cfg, Policy: pol, ViaKey: r.viaKey}))
	r.t.Cleanup(r.bare.Close)
	return w
}

// slackMessages are the messages the fake Slack's incoming webhook took.
func (r *notifyRig) slackMessages() []map[string]any {
	var out []map[string]any
	for _, q := range r.slack.requests("/incoming") {
		var m map[string]any
		if err := json.Unmarshal(q.body, &m); err != nil {
			r.t.Fatalf("a Slack message that is not JSON: %v: %s", err, q.body)
		}
		out = append(out, m)
	}
	return out
}

// button is the value (or url) of the Slack message's button actionID.
func button(t *testing.T, msg map[string]any, actionID string) string {
	t.Helper()
	blocks, _ := msg["blocks"].([]any)
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		elems, _ := bm["elements"].([]any)
		for _, e := range elems {
			em, _ := e.(map[string]any)
			if em["action_id"] == actionID {
				if v, ok := em["value"].(string); ok {
					return v
				}
				v, _ := em["url"].(string)
				return v
			}
		}
	}
	t.Fatalf("no button %s in the Slack message %v", actionID, msg)
	return ""
}

// click POSTs a Slack interaction (a click on actionID with value, by the
// Slack user) to the rig's listener, signed with secret at ts, and returns
// the status.
func (r *notifyRig) click(secret string, ts time.Time, user, actionID, value string) int {
	r.t.Helper()
	return r.clickAt(r.door.URL, secret, ts, user, actionID, value)
}

// clickAt is click to the listener at base.
func (r *notifyRig) clickAt(base, secret string, ts time.Time, user, actionID, value string) int {
	r.t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type":         "block_actions",
		"user":         map[string]string{"id": user, "username": strings.ToLower(user), "name": strings.ToLower(user)},
		"actions":      []map[string]string{{"action_id": actionID, "value": value, "action_ts": "1700000000.000100"}},
		"response_url": r.slack.srv.URL + "/respond/" + user,
		"trigger_id":   "trigger-1",
	})
	body := "payload=" + url.QueryEscape(string(payload))
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = io.WriteString(mac, "v0:"+stamp+":"+body)
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// linkIn is the confirm page's link in an e-mail.
func linkIn(t *testing.T, m smtptest.Message) string {
	t.Helper()
	text := mailText(t, m)
	i := strings.Index(text, "/confirm?t=")
	if i < 0 {
		t.Fatalf("no confirm link in the e-mail:\n%s", text)
	}
	start := strings.LastIndex(text[:i], "http")
	end := i + strings.IndexAny(text[i:], " \r\n")
	return text[start:end]
}

// mailText is an e-mail's headers and its body, decoded.
func mailText(t *testing.T, m smtptest.Message) string {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("an e-mail that does not parse: %v", err)
	}
	body := io.Reader(msg.Body)
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	for k, v := range msg.Header {
		fmt.Fprintf(&head, "%s: %s\n", k, strings.Join(v, ", "))
	}
	return head.String() + "\n" + string(b)
}

// get GETs u as a mail scanner would, and returns the status and body.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; SafeLinksScanner/1.0)")
	return do(t, req)
}

// do sends req and returns the status and body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// confirmPost POSTs the confirm page's form to the rig's listener.
func (r *notifyRig) confirmPost(token, decision, reason string) (int, string) {
	r.t.Helper()
	return postConfirm(r.t, r.door.URL, token, decision, reason)
}

// bareConfirmPost POSTs the confirm page's form to a listener that cannot
// read the authority namespace: it signs a click without looking for its
// link's record, so what decides is the run's own check.
func (r *notifyRig) bareConfirmPost(token, decision, reason string) (int, string) {
	r.t.Helper()
	return postConfirm(r.t, r.bare.URL, token, decision, reason)
}

// postConfirm POSTs the confirm page's form to the listener at base, as the
// page in a browser does (same origin).
func postConfirm(t *testing.T, base, token, decision string, reason ...string) (int, string) {
	t.Helper()
	form := url.Values{"t": {token}, "decision": {decision}, "reason": {strings.Join(reason, "")}}
	req, _ := http.NewRequest(http.MethodPost, base+"/confirm", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(t, req)
}

// tokenOf is the link token in a confirm link.
func tokenOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("t")
}

// notices lists "CALL STATUS REASON ERROR" for the trace's notification records.
func notices(trace []workflows.TraceRecord) []string {
	var out []string
	for _, r := range trace {
		if r.Status == workflows.TraceNotified || r.Status == workflows.TraceNotifyFailed {
			out = append(out, strings.TrimSpace(r.CallID+" "+r.Status+" "+r.Reason+" "+r.Error))
		}
	}
	return out
}
