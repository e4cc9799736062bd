package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/text"

	oai "github.com/openai/openai-go/v3"
	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
)

// The endpoint: its URL, its errors, and keeping the key out of every message.

// transportError classifies a failed request as an activity error. Its text
// names the endpoint, the status and the endpoint's message, with the key
// redacted; no error of the library is kept as a cause, so nothing unredacted
// crosses the activity boundary.
func (p *Planner) transportError(err error, res *http.Response, endpoint string, keySent bool) error {
	status, msg := 0, ""
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		status = apiErr.StatusCode
		msg = apiErr.Message
		if msg == "" {
			msg = apiErr.RawJSON()
		}
		if res == nil {
			res = apiErr.Response
		}
	} else if res != nil && res.StatusCode >= 400 {
		status = res.StatusCode
	}
	if status != 0 && strings.TrimSpace(msg) == "" && res != nil && res.Body != nil {
		// An error body that is not OpenAI's JSON shape (a proxy's page, a
		// local server's plain text): quote its beginning.
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		msg = string(b)
	}

	if status == 0 {
		text := fmt.Sprintf("openai planner: POST %s failed: %s", endpoint, err.Error())
		return temporal.NewApplicationError(p.clip(text), ErrUnavailable)
	}

	msg = strings.TrimSpace(oneLine(msg))
	if msg == "" {
		msg = "no message"
	}
	text := fmt.Sprintf("openai planner: POST %s answered %d %s: %s", endpoint, status, http.StatusText(status), msg)
	if status == http.StatusUnauthorized && !keySent {
		text += " (no API key was sent: the worker has none, or the run's base_url is not the worker's endpoint, and the worker's key is only sent there)"
	}
	text = p.clip(text)

	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
		opts := temporal.ApplicationErrorOptions{}
		if d, ok := retryAfter(res); ok {
			opts.NextRetryDelay = d
		}
		return temporal.NewApplicationErrorWithOptions(text, ErrUnavailable, opts)
	default:
		return temporal.NewNonRetryableApplicationError(text, ErrRejected, nil)
	}
}

// retryAfter reads Retry-After-Ms or Retry-After (seconds or an HTTP date).
func retryAfter(res *http.Response) (time.Duration, bool) {
	if res == nil {
		return 0, false
	}
	var d time.Duration
	if v := res.Header.Get("Retry-After-Ms"); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms <= 0 {
			return 0, false
		}
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := res.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			if secs <= 0 {
				return 0, false
			}
			d = time.Duration(secs * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = time.Until(t)
		}
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

var (
	bearerPattern = regexp.MustCompile(`(?i)\bbearer\s+[^\s"',;]+`)
	skPattern     = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*.]{3,}`)
)

// redact removes the API key (and anything that looks like a bearer token or
// an OpenAI-style key) from s.
func (p *Planner) redact(s string) string {
	if p.key != "" {
		s = strings.ReplaceAll(s, p.key, "[redacted]")
	}
	s = bearerPattern.ReplaceAllString(s, "Bearer [redacted]")
	return skPattern.ReplaceAllString(s, "sk-[redacted]")
}

// clip redacts s, then bounds its length (redacting first, so a cut can never
// leave a piece of the key behind).
func (p *Planner) clip(s string) string {
	s = p.redact(s)
	if len(s) <= maxErrorText {
		return s
	}
	return text.Cut(s, maxErrorText) + "…"
}

// ---------------------------------------------------------------------------
// Endpoints and logging.

// parseBaseURL accepts an absolute http(s) URL.
func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", redactURLText(s))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL", u.Redacted())
	}
	if u.Path != "" && !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u, nil
}

// redactURLText drops anything before an "@" of text that did not parse as a URL.
func redactURLText(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…@" + s[i+1:]
	}
	return s
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	if a == nil || b == nil {
		return false
	}
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// describeEndpoint is the chat completions URL without user info or query:
// safe to log and to put in errors.
func describeEndpoint(base *url.URL) string {
	if base == nil {
		return "chat/completions"
	}
	u := url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path}
	return strings.TrimSuffix(u.String(), "/") + "/chat/completions"
}

// loggerFor is the activity's logger, or a silent one outside an activity.
func loggerFor(ctx context.Context) tlog.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
