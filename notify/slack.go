package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/workflows"
)

// Slack action ids of a waiting call's buttons: the interactivity endpoint
// takes the first two (value: the link token); Open only opens the link.
const (
	SlackActionApprove = "toolgate_approve"
	SlackActionReject  = "toolgate_reject"
	SlackActionOpen    = "toolgate_open"
)

// Slack's limits: a section's text, a header's, a fallback text.
const (
	slackTextLimit   = 3000
	slackHeaderLimit = 150
)

// slackUserID is what a Slack user id looks like; only such an id becomes a
// mention.
var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// slackEscape escapes Slack's mrkdwn control characters in text that comes
// from the run: no mention, link or channel ping can be smuggled in.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip cuts s to at most n bytes on a rune boundary, saying so.
func clip(s string, n int, more string) string {
	if len(s) <= n {
		return s
	}
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + more
}

func slackMention(a workflows.Recipient) string {
	name := slackEscape(a.Name)
	if slackUserID.MatchString(a.Slack) {
		return name + " (<@" + a.Slack + ">)"
	}
	return name
}

func plainText(s string) map[string]any {
	return map[string]any{"type": "plain_text", "text": s, "emoji": false}
}

func mrkdwn(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s} }

func section(s string) map[string]any {
	return map[string]any{"type": "section", "text": mrkdwn(clip(s, slackTextLimit, "… (clipped)"))}
}

// slackFacts are n's header and sections, every text from the run escaped.
func slackFacts(n workflows.Notification) (string, []any) {
	title := slackEscape(headline(n))
	blocks := []any{map[string]any{"type": "header", "text": plainText(clip(title, slackHeaderLimit, "…"))}}
	var lines []string
	for _, f := range facts(n, slackEscape, slackMention) {
		v := f.value
		if !f.rendered {
			v = slackEscape(v)
		}
		if f.code {
			v = "`" + strings.ReplaceAll(v, "`", "'") + "`"
		}
		lines = append(lines, "*"+f.label+":* "+v)
	}
	blocks = append(blocks, section(strings.Join(lines, "\n")))
	if len(n.Args) > 0 && n.Event == workflows.NotifyWaiting {
		blocks = append(blocks, section(slackArgs(n.Args)))
	}
	return title, blocks
}

// slackArgs is the arguments as a code block that fits a section.
func slackArgs(args json.RawMessage) string {
	var pretty bytes.Buffer
	text := string(args)
	if json.Indent(&pretty, args, "", "  ") == nil {
		text = pretty.String()
	}
	text = slackEscape(text)
	text = strings.ReplaceAll(text, "```", "`\u200b``") // no way out of the block
	const head, tail, more = "*Arguments:*\n```", "```", "\n… (clipped)"
	if room := slackTextLimit - len(head) - len(tail); len(text) > room {
		text = clip(text, room-len(more), "") + more
	}
	return head + text + tail
}

// SlackMessage is the Slack message (Block Kit) of n: a header, the facts,
// the arguments, and for a waiting call with a link token and link the
// Approve and Reject buttons (value: token) and an Open button (url: link).
func SlackMessage(n workflows.Notification, token, link string) map[string]any {
	title, blocks := slackFacts(n)
	if n.Event == workflows.NotifyWaiting && token != "" && link != "" {
		blocks = append(blocks, map[string]any{
			"type":     "actions",
			"block_id": "toolgate_decide",
			"elements": []any{
				map[string]any{"type": "button", "action_id": SlackActionApprove, "text": plainText("Approve"), "style": "primary", "value": token},
				map[string]any{"type": "button", "action_id": SlackActionReject, "text": plainText("Reject"), "style": "danger", "value": token},
				map[string]any{"type": "button", "action_id": SlackActionOpen, "text": plainText("Open"), "url": link},
			},
		})
	}
	return map[string]any{"text": clip(title, slackTextLimit, "…"), "blocks": blocks}
}

// SlackOutcome is n's message once decided: the same facts, the buttons
// replaced by one context line saying outcome ("approved by alice via slack
// at …").
func SlackOutcome(n workflows.Notification, outcome string) map[string]any {
	title, blocks := slackFacts(n)
	blocks = append(blocks, map[string]any{
		"type":     "context",
		"elements": []any{mrkdwn(clip(slackEscape(outcome), slackTextLimit, "…"))},
	})
	return map[string]any{"text": clip(title+": "+slackEscape(outcome), slackTextLimit, "…"), "blocks": blocks}
}

// slackTest is a test message's body.
func slackTest(t Target, n workflows.Notification) map[string]any {
	text := fmt.Sprintf("toolgate test message from notify target %s at %s", slackEscape(t.Name), n.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	return map[string]any{"text": text, "blocks": []any{section(text)}}
}

// sendSlack POSTs n's message to t's incoming webhook.
func (s *Sender) sendSlack(ctx context.Context, t Target, n workflows.Notification, key string, lg *linkLog) (string, error) {
	var msg map[string]any
	if n.Event == EventTest {
		msg = slackTest(t, n)
	} else {
		link, err := s.linkFor(lg, n, t.Name, ViaSlack) // names the target: the clicker is who Slack says
		if err != nil {
			return "", err
		}
		msg = SlackMessage(n, link.Token, link.URL)
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return "", refused("encode the message: %v", err)
	}
	return s.post(ctx, t, t.Slack, body, map[string]string{"Idempotency-Key": key}) // Slack ignores it; a proxy may not
}
