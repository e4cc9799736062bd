package confirm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/tool"
)

var pageTemplate = template.Must(template.ParseFS(static, "static/page.html"))

// page is what a response of the confirm page shows: a call's card with its
// form, what became of a decision, or why a request was refused.
type page struct {
	Title   string
	Message string
	Good    bool // Message says something was done
	Card    *card
}

// card is a waiting call as the page shows it: every string from the run
// with its control and bidi characters marked.
type card struct {
	Run, Call, Tool, Kind, Digest   string
	Args                            string
	Reason, Rule, Needs, ApprovedBy string
	Requested, Expires              string
	EditedBy                        string
	Token                           string
	// Who says who the decision is by, and how.
	Who string
	// Sign: the decision must be signed in the page with the approver's key
	// (data for confirm.js, exact, never marked).
	Sign *signing
}

// signing is what the page's script signs a decision with.
type signing struct {
	Name, Run, Call, Digest, Kind, Asked string
	ValidFor                             int
}

// page is GET (and HEAD) /confirm?t=TOKEN: the call's card and a form that
// posts the decision. It never decides.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := contextFor(r, h.opts.Timeout)
	defer cancel()
	f, ref := h.lookup(ctx, r.URL.Query().Get("t"))
	if ref != nil {
		h.refused(w, ref)
		return
	}
	c := h.cardOf(f)
	m, why := h.modeOf(f)
	switch m {
	case modeLink:
		c.Who = fmt.Sprintf("You decide as %s: this link was sent to them by %s.", marked(f.link.Recipient), f.link.Channel)
	case modeVia:
		c.Who = fmt.Sprintf("You decide as %s via %s: this listener signs the decision with its via key.", marked(f.link.Recipient), f.link.Channel)
	default:
		c.Who = fmt.Sprintf("This run is under an approval policy, and a decision by this link alone does not count (%s). "+
			"Sign it with your own key: choose your key file (NAME.key from toolgate keys new NAME); it is read in this page and never sent.", marked(why.Error()))
		valid := 600
		if h.opts.Policy != nil {
			valid = min(valid, int(h.opts.Policy.TokenLifetime()/time.Second))
		}
		c.Sign = &signing{Name: f.link.Recipient, Run: f.link.WorkflowID, Call: f.it.CallID, Digest: f.it.ArgsDigest,
			Kind: string(f.it.Kind), Asked: strconv.FormatInt(f.it.RequestedAt.UnixNano(), 10), ValidFor: valid}
	}
	h.render(w, http.StatusOK, page{Title: "decide " + f.it.CallID + " (" + marked(f.it.Tool) + ")", Card: &c})
}

// mode is who a decision by link is by.
type mode int

const (
	modeLink mode = iota // no policy: the link's recipient, through its channel
	modeVia              // under a policy, signed with the via key: the recipient's via names the channel
	modeSign             // under a policy, signed in the page with the approver's own key
)

// modeOf says who decides f's call, and (modeSign) why not by the link.
func (h *Handler) modeOf(f found) (mode, error) {
	if !f.state.Policy {
		return modeLink, nil
	}
	if f.link.Channel != notify.ViaEmail {
		// A Slack message's or a webhook's link names a target, not a
		// person: whoever can read the channel holds it. A click in Slack
		// decides as the Slack user Slack signs for (/slack/interactions);
		// the page decides only with the approver's signature.
		return modeSign, fmt.Errorf("a link from %s %s names no approver", f.link.Channel, quote(f.link.Recipient))
	}
	if err := h.mayClick(f.link.Recipient, f.link.Channel); err != nil {
		return modeSign, err
	}
	return modeVia, nil
}

// cardOf is f's call as the page shows it.
func (h *Handler) cardOf(f found) card {
	it := f.it
	c := card{Run: marked(f.link.WorkflowID), Call: marked(it.CallID), Tool: marked(it.Tool), Kind: string(it.Kind),
		Digest: it.ArgsDigest, Args: marked(prettyJSON(it.CallArgs)), Reason: marked(it.Reason), Rule: marked(it.Rule),
		Needs: "any operator (the run has no policy)", ApprovedBy: marked(strings.Join(it.ApprovedBy, ", ")),
		Requested: when(it.RequestedAt), Expires: when(it.ExpiresAt), EditedBy: marked(it.EditedBy), Token: f.token}
	if it.Needs != nil {
		c.Needs = marked(it.Needs.Describe())
	} else if f.state.Policy {
		c.Needs = "approvers of the deployment's policy"
	}
	return c
}

// refused renders a refusal.
func (h *Handler) refused(w http.ResponseWriter, ref *refusal) {
	h.render(w, ref.status, page{Title: "refused", Message: marked(ref.msg)})
}

func (h *Handler) render(w http.ResponseWriter, status int, p page) {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// prettyJSON is raw indented, numbers as written; raw as it is if it is not
// JSON.
func prettyJSON(raw json.RawMessage) string {
	canon, err := tool.Canonical(raw)
	if err != nil {
		canon = raw
	}
	var b bytes.Buffer
	if err := json.Indent(&b, canon, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

// special are the control and bidi characters a page shows as marks, never
// applies (as the inbox does): an override could make it show other text
// than the run holds.
var special = regexp.MustCompile("[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

// marked is s with each control (but newline) or bidi character replaced by
// a visible mark ("[U+202E]").
func marked(s string) string {
	return special.ReplaceAllStringFunc(s, func(ch string) string {
		return fmt.Sprintf("[U+%04X]", []rune(ch)[0])
	})
}
