package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/workflows"
)

func slackConfig(url string) *Config {
	return &Config{Targets: []Target{{Name: "team", Slack: url + hookPath, Timeout: "2s"}}}
}

// slackBlocks decodes a message Slack received.
func slackBlocks(t *testing.T, body []byte) (string, []map[string]any) {
	t.Helper()
	var msg struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(body, &msg))
	return msg.Text, msg.Blocks
}

func blockText(b map[string]any) string {
	if t, ok := b["text"].(map[string]any); ok {
		s, _ := t["text"].(string)
		return s
	}
	return ""
}

func TestSlackDelivers(t *testing.T) {
	srv, got := hookServer(t, http.StatusOK, "ok")
	c := slackConfig(srv.URL)
	pub := withLinks(t, c)
	d, err := NewSender(c).Deliver(context.Background(), waiting("team"))
	require.NoError(t, err)
	assert.Equal(t, "HTTP 200", d.Detail)
	assert.Equal(t, KindSlack, d.Kind)

	r := <-got
	text, blocks := slackBlocks(t, r.body)
	assert.Equal(t, "close_ticket (c-3) waits for a decision", text)
	require.Len(t, blocks, 4)
	assert.Equal(t, "header", blocks[0]["type"])
	assert.Equal(t, "close_ticket (c-3) waits for a decision", blockText(blocks[0]))

	facts := blockText(blocks[1])
	for _, want := range []string{"run-1 (run r-1)", "`c-3`", "`close_ticket`", "1 of support-lead: alice (<@U123ABC>), bob",
		"`d1g3st`", waiting("team").ExpiresAt.Format(time.RFC3339)} {
		assert.Contains(t, facts, want)
	}
	// Text from the run arrives escaped: no mention, no markup.
	assert.Contains(t, facts, "destructive &lt;@here&gt; &amp; more")
	assert.NotContains(t, facts, "<@here>")
	args := blockText(blocks[2])
	assert.Contains(t, args, "```")
	assert.Contains(t, args, "&lt;script&gt;alert(1)&lt;/script&gt; &lt;!here&gt;")
	assert.NotContains(t, string(r.body), "<script>")
	assert.NotContains(t, string(r.body), "<!here>")

	// The buttons: approve and reject carry a link token for this call;
	// Open links to the confirm page.
	assert.Equal(t, "actions", blocks[3]["type"])
	els := blocks[3]["elements"].([]any)
	require.Len(t, els, 3)
	byID := map[string]map[string]any{}
	for _, e := range els {
		m := e.(map[string]any)
		byID[m["action_id"].(string)] = m
	}
	assert.Equal(t, "primary", byID[SlackActionApprove]["style"])
	assert.Equal(t, "danger", byID[SlackActionReject]["style"])
	for _, id := range []string{SlackActionApprove, SlackActionReject} {
		tok, _ := byID[id]["value"].(string)
		l, err := VerifyLink(pub, tok, time.Now())
		require.NoError(t, err, id)
		assert.Equal(t, Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: "d1g3st", Recipient: "team", Channel: "slack"},
			Link{WorkflowID: l.WorkflowID, CallID: l.CallID, ArgsDigest: l.ArgsDigest, Recipient: l.Recipient, Channel: l.Channel})
	}
	open, _ := byID[SlackActionOpen]["url"].(string)
	assert.True(t, strings.HasPrefix(open, "https://toolgate.example/confirm?t="), open)
	assert.Equal(t, byID[SlackActionApprove]["value"], linkToken(t, open))
}

func TestSlackNoLinksNoButtons(t *testing.T) {
	srv, got := hookServer(t, http.StatusOK, "ok")
	_, err := NewSender(slackConfig(srv.URL)).Deliver(context.Background(), waiting("team"))
	require.NoError(t, err)
	_, blocks := slackBlocks(t, (<-got).body)
	require.Len(t, blocks, 3, "header, facts, arguments")
	for _, b := range blocks {
		assert.NotEqual(t, "actions", b["type"])
	}
	// A token without a link (or the reverse) makes no buttons either.
	_, blocks = slackBlocks(t, mustJSON(t, SlackMessage(waiting("team"), "tok", "")))
	assert.Len(t, blocks, 3)
}

func TestSlackArgsClipped(t *testing.T) {
	n := waiting("team")
	n.Args = json.RawMessage(`{"blob":"` + "```" + strings.Repeat("<", 5000) + `"}`)
	_, blocks := slackBlocks(t, mustJSON(t, SlackMessage(n, "", "")))
	args := blockText(blocks[2])
	assert.LessOrEqual(t, len(args), slackTextLimit)
	assert.True(t, strings.HasSuffix(args, "… (clipped)```"), args[len(args)-40:])
	assert.Equal(t, 2, strings.Count(args, "```"), "no way out of the code block")
}

func TestSlackOutcome(t *testing.T) {
	msg := SlackOutcome(waiting("team"), "approved by alice via slack at 12:00 <!channel>")
	_, blocks := slackBlocks(t, mustJSON(t, msg))
	last := blocks[len(blocks)-1]
	assert.Equal(t, "context", last["type"])
	els := last["elements"].([]any)
	assert.Equal(t, "approved by alice via slack at 12:00 &lt;!channel&gt;", els[0].(map[string]any)["text"])
	for _, b := range blocks {
		assert.NotEqual(t, "actions", b["type"])
	}
}

func TestSlackOtherEvents(t *testing.T) {
	n := waiting("team")
	n.Event, n.Decision, n.By = workflows.NotifyDecided, "approved", "alice"
	text, blocks := slackBlocks(t, mustJSON(t, SlackMessage(n, "tok", "https://x")))
	assert.Equal(t, "close_ticket (c-3) approved by alice", text)
	require.Len(t, blocks, 2, "header and facts only")
	assert.Contains(t, blockText(blocks[1]), "*Decision:* approved")

	n = workflows.Notification{Event: workflows.NotifyFailed, WorkflowID: "run-<2>", Error: "planner: <!everyone>", Status: "failed"}
	text, blocks = slackBlocks(t, mustJSON(t, SlackMessage(n, "", "")))
	assert.Equal(t, "run run-&lt;2&gt; failed", text)
	assert.Contains(t, blockText(blocks[1]), "*Error:* planner: &lt;!everyone&gt;")
}

func TestSlackErrors(t *testing.T) {
	for code, retry := range map[int]bool{400: false, 403: false, 404: false, 429: true, 500: true, 503: true} {
		srv, _ := hookServer(t, code, "invalid_payload")
		_, err := NewSender(slackConfig(srv.URL)).Deliver(context.Background(), waiting("team"))
		if retry {
			requireRetryable(t, err)
		} else {
			ae := requireRefused(t, err)
			assert.Contains(t, ae.Message(), "team (slack): HTTP ")
		}
		noSecrets(t, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
