package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/workflows"
)

// Error types of the notify activity's errors (temporal.ApplicationError's
// type): a refusal that no retry can fix, and a failure worth retrying.
const (
	ErrTypeRefused = "NotifyRefused"
	ErrTypeFailed  = "NotifyFailed"
)

// EventTest is the event of a test message (Test); no run sends it.
const EventTest = "test"

// maxBody is how much of any response body is read; maxShown how much of it
// an error quotes.
const (
	maxBody  = 4 << 10
	maxShown = 200
)

// Sender delivers notifications to the targets of one notify file: its
// Deliver is the notify activity (workflows.NotifyActivity).
type Sender struct {
	c       *Config
	clients map[string]*http.Client
	now     func() time.Time
}

// Targets are what the worker declares to its runs of its targets (Config.Declared).
func (s *Sender) Targets() []workflows.NotifyTarget { return s.c.Declared() }

// NewSender makes the Sender of c's targets: one HTTP client per target,
// bounded by the target's attempt timeout, that never follows a redirect.
func NewSender(c *Config) *Sender {
	s := &Sender{c: c, clients: map[string]*http.Client{}, now: time.Now}
	for _, t := range c.Targets {
		s.clients[t.Name] = &http.Client{
			Timeout: t.AttemptTimeout(),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a 3xx is a refusal: see checkHTTP
			},
		}
	}
	return s
}

// Deliver is the notify activity: it delivers n to the one target it names
// and says what was sent, with the links it sent (Delivery.Links, its
// earlier attempts' too). It heartbeats while it runs (every
// workflows.NotifyHeartbeat/3). Its errors are temporal.ApplicationErrors,
// of type NotifyRefused (not retryable: a 4xx, a redirect, a bad config, a
// mail server's 5xx) or NotifyFailed (retryable), whose details are the
// links sent so far; none quotes a secret or a webhook's full URL.
func (s *Sender) Deliver(ctx context.Context, n workflows.Notification) (workflows.Delivery, error) {
	t, ok := s.c.Target(n.Target)
	if !ok {
		return workflows.Delivery{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notify target %.80q is not in this worker's notify file", n.Target), ErrTypeRefused, nil)
	}
	lg := newLinkLog(ctx)
	defer lg.heartbeating()()
	return s.deliver(ctx, t, n, deliveryKey(ctx, n), nil, lg)
}

// deliveryKey is the delivery's idempotency key: the activity's own
// identity when ctx is an activity's (the same across its retries), else
// one made of what the notification names.
func deliveryKey(ctx context.Context, n workflows.Notification) string {
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		return info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	return n.WorkflowID + "/" + n.RunID + "/" + n.Event + "/" + n.CallID + "/" + n.Target
}

// deliver sends n to t by t's kind, logging the links it sends in lg; to,
// when not nil, replaces an e-mail's recipients (a test message).
func (s *Sender) deliver(ctx context.Context, t Target, n workflows.Notification, key string, to []recipient, lg *linkLog) (workflows.Delivery, error) {
	var detail string
	var err error
	switch t.Kind() {
	case KindWebhook:
		detail, err = s.sendWebhook(ctx, t, n, key, lg)
	case KindSlack:
		detail, err = s.sendSlack(ctx, t, n, key, lg)
	case KindEmail:
		detail, err = s.sendEmail(ctx, t, n, key, to, lg)
	default:
		err = refused("target has no webhook, slack or smtp")
	}
	if err != nil {
		return workflows.Delivery{}, appError(t, err, lg.list()...)
	}
	return workflows.Delivery{Target: t.Name, Kind: t.Kind(), Detail: detail, Key: key, Links: lg.list()}, nil
}

// sendError is why a delivery failed, and whether retrying may help.
type sendError struct {
	msg       string
	retryable bool
}

// Error is why.
func (e *sendError) Error() string { return e.msg }

func refused(format string, args ...any) error {
	return &sendError{msg: fmt.Sprintf(format, args...)}
}

func failed(format string, args ...any) error {
	return &sendError{msg: fmt.Sprintf(format, args...), retryable: true}
}

// appError is err as the activity returns it: "NAME (KIND): why", with t's
// secrets and URLs taken out, retryable or not; its details are the links
// sent so far, if any (the run keeps them: a link a failed delivery sent
// may have reached its recipient).
func appError(t Target, err error, links ...workflows.LinkProof) error {
	retryable := true
	var se *sendError
	if errors.As(err, &se) {
		retryable = se.retryable
	}
	msg := redact(t, fmt.Sprintf("%s (%s): %s", t.Name, t.Kind(), err.Error()))
	typ := ErrTypeRefused
	if retryable {
		typ = ErrTypeFailed
	}
	var details []any
	if len(links) > 0 {
		details = []any{links}
	}
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{NonRetryable: !retryable, Details: details})
}

// redact takes t's secrets, and the parts of its URLs beyond scheme and
// host, out of msg.
func redact(t Target, msg string) string {
	var secrets []string
	for _, u := range []string{t.Webhook, t.Slack} {
		if u == "" {
			continue
		}
		secrets = append(secrets, u)
		if p, err := url.Parse(u); err == nil {
			if len(p.EscapedPath()) > 1 {
				secrets = append(secrets, p.EscapedPath(), p.Path)
			}
			if p.RawQuery != "" {
				secrets = append(secrets, p.RawQuery)
			}
		}
	}
	secrets = append(secrets, t.Secret, t.Password, t.SigningSecret)
	for _, s := range secrets {
		if len(s) > 1 {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}

// showURL is the part of a secret URL an error or a detail may show: its
// scheme and host.
func showURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "(a URL that does not parse)"
	case u.Host == "":
		return "(a relative URL)"
	}
	return u.Scheme + "://" + u.Host
}

// post POSTs body (JSON) to rawURL with headers, and classes the answer: a
// 2xx is delivered ("HTTP 200"); a 3xx, or a 4xx but 408 and 429, refused;
// anything else failed, for now.
func (s *Sender) post(ctx context.Context, t Target, rawURL string, body []byte, headers map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return "", refused("bad URL %s", showURL(rawURL))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := s.clients[t.Name]
	if client == nil {
		client = &http.Client{Timeout: t.AttemptTimeout(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error quotes the whole URL: a secret
		}
		why := "request failed"
		if ue != nil && ue.Timeout() {
			why = fmt.Sprintf("no answer within %s", t.AttemptTimeout())
		}
		return "", failed("POST %s: %s: %v", showURL(rawURL), why, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return fmt.Sprintf("HTTP %d", code), nil
	case code >= 300 && code < 400:
		return "", refused("HTTP %d: a redirect (to %s), not followed", code, showURL(resp.Header.Get("Location")))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return "", refused("HTTP %d: %s", code, shown(data))
	}
	return "", failed("HTTP %d: %s", code, shown(data))
}

// shown is the first bytes of a response body, on one line, as an error
// may quote them.
func shown(data []byte) string {
	if len(data) > maxShown {
		data = data[:maxShown]
	}
	s := strings.ToValidUTF8(string(data), "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
