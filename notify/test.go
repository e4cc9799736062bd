package notify

import (
	"context"
	"errors"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/workflows"
)

// TestResult is what a test message to one target came to: Detail when it
// was delivered, Err when not.
type TestResult struct {
	Target, Kind, Detail string
	Err                  error
}

// Test sends one test message (event "test") to every target of c, in
// order: a webhook its signed body, Slack a plain section, e-mail a message
// to the target's to: addresses only.
func Test(ctx context.Context, c *Config) []TestResult {
	s := NewSender(c)
	now := s.now()
	var out []TestResult
	for _, t := range c.Targets {
		n := workflows.Notification{Event: EventTest, Target: t.Name, WorkflowID: "toolgate-test", Status: "test", At: now.UTC()}
		key := "toolgate-test/" + t.Name + "/" + strconv.FormatInt(now.UnixNano(), 10)
		r := TestResult{Target: t.Name, Kind: t.Kind()}
		var to []recipient
		if t.Kind() == KindEmail {
			to = toRecipients(t, map[string]bool{})
			if len(to) == 0 {
				r.Err = appError(t, refused("a test message goes to to: addresses; this target has none"))
				out = append(out, r)
				continue
			}
		}
		d, err := s.deliver(ctx, t, n, key, to, nil)
		r.Detail, r.Err = d.Detail, err
		out = append(out, r)
	}
	return out
}

// Reason is why err, a Deliver or Test error, happened, without the
// "NAME (KIND): " it starts with and Temporal's own suffix.
func Reason(t, kind string, err error) string {
	msg := err.Error()
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	prefix := t + " (" + kind + "): "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}
