package confirm

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/webguard"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// MaxReasonBytes bounds the reason (or note) typed on the page.
const MaxReasonBytes = 2000

// decide is POST /confirm: the page's form (t, decision, reason and, when
// the approver signs in the page, token), sent as one update bound to the
// link's call and args_digest, under an id the same POST always has.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		h.refused(w, refuse(http.StatusUnsupportedMediaType, "a decision is the confirm page's form (Content-Type: application/x-www-form-urlencoded): nothing was decided"))
		return
	}
	if err := sameOrigin(r); err != nil {
		h.refused(w, refuse(http.StatusForbidden, "%v: nothing was decided", err))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refused(w, refuse(http.StatusRequestEntityTooLarge, "the form is over %d bytes: nothing was decided", MaxBodyBytes))
			return
		}
		h.refused(w, refuse(http.StatusBadRequest, "the form does not parse (%v): nothing was decided", err))
		return
	}
	form := r.PostForm
	decision, reason, token := form.Get("decision"), strings.TrimSpace(form.Get("reason")), form.Get("token")
	switch {
	case len(form["decision"]) != 1 || (decision != signed.ActionApprove && decision != signed.ActionReject):
		h.refused(w, refuse(http.StatusBadRequest, "decision %s: want approve or reject, once; nothing was decided", quote(decision)))
		return
	case len(form["t"]) != 1 || len(form["token"]) > 1 || len(form["reason"]) > 1:
		h.refused(w, refuse(http.StatusBadRequest, "the form gives t once, and reason and token at most once: nothing was decided"))
		return
	case len(reason) > MaxReasonBytes:
		h.refused(w, refuse(http.StatusBadRequest, "the reason is over %d bytes: nothing was decided", MaxReasonBytes))
		return
	}
	approve := decision == signed.ActionApprove
	ctx, cancel := contextFor(r, h.opts.Timeout)
	defer cancel()
	f, ref := h.lookup(ctx, form.Get("t"))
	if ref != nil {
		h.refused(w, ref)
		return
	}
	in, by, ref := h.linkDecision(f, approve, reason, token)
	if ref != nil {
		h.refused(w, ref)
		return
	}
	// The same POST is the same update: the link and the decision, and —
	// signed in the page — who signed it, so two approvers of a quorum who
	// open one link are two approvals, never one update.
	parts := []string{f.token, decision}
	if in.Token != "" && in.Via == "" {
		parts = append(parts, "\x00"+by)
	}
	res, err := h.b.Decide(ctx, f.link.WorkflowID, approve, in, client.WithUpdateID(updateID("link-", parts...)))
	if err != nil {
		err = fmt.Errorf("%s %s of run %s: %w", decision, f.it.CallID, f.link.WorkflowID, err)
		h.refused(w, refuse(decideStatus(err), "refused: %v", err))
		return
	}
	h.render(w, http.StatusOK, page{Title: "decided", Good: true, Message: marked(outcome(res, f.it, by, in.Via))})
}

// linkDecision is the decision the form makes on f's call, and who by.
func (h *Handler) linkDecision(f found, approve bool, reason, token string) (workflows.DecisionInput, string, *refusal) {
	in := workflows.DecisionInput{CallID: f.it.CallID, ArgsDigest: f.link.ArgsDigest, Kind: f.it.Kind}
	m, why := h.modeOf(f)
	if m != modeSign && token != "" {
		return in, "", refuse(http.StatusBadRequest, "a token goes with a decision signed in the page, and this one is decided by the link: nothing was decided")
	}
	if m != modeSign && !approve && reason == "" {
		return in, "", refuse(http.StatusBadRequest, "a rejection needs a reason (the planner is told it): type one and reject again; nothing was decided")
	}
	switch m {
	case modeLink:
		in.Approver, in.Via, in.Link = f.link.Recipient, f.link.Channel, f.link.Secret
		if f.link.Channel != notify.ViaEmail {
			in.Approver = f.link.Channel + ":" + f.link.Recipient // a Slack message's or a webhook's link names a target, not a person
		}
		if approve {
			in.Note = reason
		} else {
			in.Reason = reason
		}
		return in, in.Approver, nil
	case modeVia:
		tok, err := h.signVia(f, f.link.Recipient, f.link.Channel, approve, reason)
		if err != nil {
			return in, "", refuse(http.StatusInternalServerError, "%v: nothing was decided", err)
		}
		in.Via, in.Token = f.link.Channel, tok
		return in, f.link.Recipient, nil
	}
	if token == "" {
		return in, "", refuse(http.StatusForbidden, "this run is under an approval policy and a decision by this link alone does not count (%v): "+
			"sign the decision with your key on the page (choose your key file, then approve or reject); nothing was decided", why)
	}
	c, err := signed.Peek(token)
	switch {
	case err != nil:
		return in, "", refuse(http.StatusBadRequest, "the signed decision does not decode (%v): nothing was decided", err)
	case c.Action != action(approve):
		return in, "", refuse(http.StatusBadRequest, "the signed decision says %s, the form %s: nothing was decided", quote(c.Action), action(approve))
	}
	in.Token = token
	return in, c.Approver, nil
}

// sameOrigin refuses a form another site's page posted: Sec-Fetch-Site,
// when sent, must say same-origin, and Origin, when sent, must be this
// page's own. "Origin: null" — what a browser sends for a form posted from
// a page under Referrer-Policy: no-referrer, as this one is — passes only
// with Sec-Fetch-Site: same-origin, which no page can forge.
func sameOrigin(r *http.Request) error {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return fmt.Errorf("cross-site form refused (Sec-Fetch-Site: %s): only the confirm page's own form decides", quote(site))
	}
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
		return nil
	case origin == "null" && site == "same-origin":
		return nil
	}
	own := webguard.OwnOrigin(r)
	if o, err := webguard.NormalOrigin(origin); err != nil || o != own {
		return fmt.Errorf("origin %s is not this page's (%s): a form on another site must not decide", quote(origin), own)
	}
	return nil
}

func contextFor(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
