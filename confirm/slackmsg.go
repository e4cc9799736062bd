package confirm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// slackReply is what is posted to a click's response_url: the message
// replaced by the call's facts and the outcome, with no buttons, or (a
// click that decides nothing) a message only the clicker sees, the buttons
// left for the right person.
type slackReply struct {
	ReplaceOriginal bool             `json:"replace_original"`
	ResponseType    string           `json:"response_type,omitempty"`
	Text            string           `json:"text"`
	Blocks          []map[string]any `json:"blocks,omitempty"`
}

// ephemeral is a reply only the clicker sees; the message stays as it is.
func ephemeral(text string) slackReply {
	return slackReply{ResponseType: "ephemeral", Text: mrkdwnText(text)}
}

// mrkdwnText is text as a message's top-level text, which Slack reads as
// mrkdwn: &, < and > escaped (so text from a run links, mentions and pings
// nobody), at most 2900 bytes.
func mrkdwnText(text string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(clipText(text, 2900))
}

// outcomeMessage replaces the message: the call's facts and what became of
// it, no buttons.
func (h *Handler) outcomeMessage(f found, text string) slackReply {
	it := f.it
	// Slack's limits: a section's text 3000 characters, a field's 2000.
	plain := func(s string) map[string]any { return map[string]any{"type": "plain_text", "text": clipText(s, 2900)} }
	field := func(s string) map[string]any { return map[string]any{"type": "plain_text", "text": clipText(s, 1900)} }
	facts := []map[string]any{field("Tool: " + it.Tool), field("Call: " + it.CallID + " (" + string(it.Kind) + ")"),
		field("Run: " + f.link.WorkflowID), field("args_digest: " + it.ArgsDigest)}
	if it.Reason != "" {
		facts = append(facts, field("Why it waited: "+it.Reason))
	}
	blocks := []map[string]any{
		{"type": "section", "text": plain(it.Tool + " · " + it.CallID), "fields": facts},
		{"type": "section", "text": plain("Arguments:\n" + prettyJSON(it.CallArgs))},
		{"type": "context", "elements": []map[string]any{plain(text)}},
	}
	return slackReply{ReplaceOriginal: true, Text: mrkdwnText(text), Blocks: blocks}
}

// reply posts msg to responseURL from a goroutine with its own timeout —
// only if responseURL starts with one of the configured response prefixes.
func (h *Handler) reply(responseURL string, msg slackReply) {
	if !h.responseAllowed(responseURL) {
		h.opts.Logger.Warn("confirm: a Slack click's response_url is outside the allowed prefixes: not posted", "host", hostOf(responseURL))
		return
	}
	body, err := json.Marshal(msg)
	if err != nil {
		h.opts.Logger.Error("confirm: encoding a Slack reply", "error", err)
		return
	}
	h.posts.Add(1)
	go func() {
		defer h.posts.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, responseURL, bytes.NewReader(body))
		if err != nil {
			h.opts.Logger.Error("confirm: a Slack reply", "host", hostOf(responseURL), "error", "bad response_url")
			return
		}
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		resp, err := h.opts.HTTPClient.Do(req)
		if err != nil {
			h.opts.Logger.Error("confirm: posting a Slack reply", "host", hostOf(responseURL), "error", "request failed")
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			h.opts.Logger.Error("confirm: posting a Slack reply", "host", hostOf(responseURL), "status", resp.StatusCode)
		}
	}()
}

// responseAllowed says whether u starts with a configured response prefix,
// at a path boundary.
func (h *Handler) responseAllowed(u string) bool {
	if h.opts.Notify == nil || u == "" {
		return false
	}
	if p, err := url.Parse(u); err != nil || p.User != nil || p.Host == "" {
		return false
	}
	for _, p := range h.opts.Notify.SlackResponsePrefixes() {
		if p != "" && strings.HasPrefix(u, p) && (strings.HasSuffix(p, "/") || len(u) == len(p) || u[len(p)] == '/') {
			return true
		}
	}
	return false
}

// hostOf is u's host, all that is logged of a response_url (its path is a
// credential).
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	return p.Host
}

// clipText is s cut to at most n bytes, on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
