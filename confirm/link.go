package confirm

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// refusal is a request refused before anything was decided: the status it
// is answered with, and why.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// found is a link's call as the run shows it now: waiting, with the link's
// args_digest.
type found struct {
	token string
	link  notify.Link
	state workflows.State
	it    workflows.Interrupt
}

// verifyLink checks a link token against the link key: its signature, its
// action and its time.
func (h *Handler) verifyLink(token string) (notify.Link, *refusal) {
	key := h.linkKey()
	if key == nil {
		return notify.Link{}, refuse(http.StatusServiceUnavailable, "this listener has no link key (notify's link_key_file), so it cannot check a link: nothing was decided")
	}
	if token == "" {
		return notify.Link{}, refuse(http.StatusBadRequest, "no link token: open the whole link the notification sent (…/confirm?t=…); nothing was decided")
	}
	pub := key.Public().(ed25519.PublicKey)
	now := h.opts.Now()
	l, err := notify.VerifyLink(pub, token, now)
	if err != nil {
		if c, e := signed.Verify(token, pub); e == nil && c.Action == notify.ActionLink && now.Unix() >= c.Expiry {
			return notify.Link{}, refuse(http.StatusGone, "this link has expired (%v): nothing was decided; decide in the inbox, or wait for a new notification", err)
		}
		return notify.Link{}, refuse(http.StatusBadRequest, "this link is not valid — tampered with, cut short, or not signed by this listener (%v): nothing was decided", err)
	}
	return l, nil
}

// find reads the run's state and finds the link's call in it, waiting with
// the link's args_digest.
func (h *Handler) find(ctx context.Context, token string, l notify.Link) (found, *refusal) {
	st, err := h.b.State(ctx, l.WorkflowID)
	switch {
	case errors.Is(err, client.ErrUnknownRun):
		return found{}, refuse(http.StatusNotFound, "unknown run %s: it does not exist (any more) in this namespace; nothing was decided", quote(l.WorkflowID))
	case err != nil:
		return found{}, refuse(http.StatusBadGateway, "reading run %s: %v", quote(l.WorkflowID), err)
	}
	for _, it := range st.Interrupts {
		if it.CallID != l.CallID {
			continue
		}
		if it.ArgsDigest != l.ArgsDigest {
			return found{}, refuse(http.StatusConflict, "the arguments of call %s (%s) changed since this link was sent (args_digest %s now, %s in the link): "+
				"nothing was decided; the link named other arguments than the call has", l.CallID, it.Tool, it.ArgsDigest, l.ArgsDigest)
		}
		if it.RequestedAt.UnixNano() != l.Asked {
			return found{}, refuse(http.StatusConflict, "call %s (%s) waits again since this link was sent (it was asked anew at %s, the link asks about the wait of %s, which ended — a rewind, or a new question of its tool): "+
				"nothing was decided; use the notification sent for this wait", l.CallID, it.Tool, it.RequestedAt.UTC().Format(time.RFC3339), time.Unix(0, l.Asked).UTC().Format(time.RFC3339))
		}
		if ref := h.recorded(ctx, l); ref != nil {
			return found{}, ref
		}
		return found{token: token, link: l, state: st, it: it}, nil
	}
	return found{}, refuse(http.StatusConflict, "call %s of run %s is not waiting for a decision any more: it was already decided (or the run moved on, status %s); nothing was decided now",
		quote(l.CallID), quote(l.WorkflowID), st.Status)
}

// LinkRecords is what a Backend that reads the authority namespace offers
// (a *client.Client does): the record a worker made of a link before it
// sent it. With it the handler refuses a link no worker recorded, before it
// signs anything; without it, the run refuses such a link (rules version 13).
type LinkRecords interface {
	LinkRecord(ctx context.Context, secret string) (workflows.LinkRecord, error)
}

var _ LinkRecords = (*client.Client)(nil)

// recorded refuses link l unless a worker recorded it, for its run, call,
// wait, recipient and channel, before sending it.
func (h *Handler) recorded(ctx context.Context, l notify.Link) *refusal {
	lr, ok := h.b.(LinkRecords)
	if !ok || l.Secret == "" {
		return nil
	}
	rec, err := lr.LinkRecord(ctx, l.Secret)
	switch {
	case errors.Is(err, authority.ErrNoRecord):
		return refuse(http.StatusForbidden, "this link has no record in the authority namespace: no toolgate worker sent it (a worker records each link before it sends it); nothing was decided")
	case err != nil:
		return refuse(http.StatusBadGateway, "reading the record of this link: %v; nothing was decided", err)
	case rec.WorkflowID != l.WorkflowID || rec.CallID != l.CallID || rec.Asked != l.Asked || rec.Recipient != l.Recipient || rec.Channel != l.Channel:
		return refuse(http.StatusForbidden, "this link's record names another wait (run %s, call %s, for %s by %s), not this link's: nothing was decided",
			quote(rec.WorkflowID), quote(rec.CallID), quote(rec.Recipient), quote(rec.Channel))
	}
	return nil
}

// lookup verifies a link and finds its call.
func (h *Handler) lookup(ctx context.Context, token string) (found, *refusal) {
	l, ref := h.verifyLink(token)
	if ref != nil {
		return found{}, ref
	}
	return h.find(ctx, token, l)
}

// signVia signs approver's decision on f's call with the via key, as made
// through channel: the claims client's signDecision fills (kind and asked
// from the interrupt), via, and the secret of the link it came through
// (the run takes it only for a link it sent).
func (h *Handler) signVia(f found, approver, channel string, approve bool, text string) (string, error) {
	now := h.opts.Now()
	c := signed.Claims{Approver: approver, WorkflowID: f.link.WorkflowID, Action: signed.ActionReject, CallID: f.it.CallID,
		ArgsDigest: f.it.ArgsDigest, Kind: string(f.it.Kind), Asked: f.it.RequestedAt.UnixNano(), Via: channel, Link: f.link.Secret,
		IssuedAt: now.Unix(), Expiry: now.Add(h.lifetime()).Unix()}
	if approve {
		c.Action, c.Note = signed.ActionApprove, text
	} else {
		c.Reason = text
	}
	tok, err := signed.Sign(h.opts.ViaKey, c)
	if err != nil {
		return "", fmt.Errorf("signing %s's decision by link: %w", approver, err)
	}
	return tok, nil
}

// updateID is the id of a decision's update: prefix and the hex SHA-256 of
// what makes the decision the same one, concatenated (so sent twice, it acts
// once).
func updateID(prefix string, parts ...string) string {
	sum := sha256.New()
	for _, p := range parts {
		sum.Write([]byte(p))
	}
	return prefix + hex.EncodeToString(sum.Sum(nil))[:40]
}

// action is the decision's verb as a page says it.
func action(approve bool) string {
	if approve {
		return signed.ActionApprove
	}
	return signed.ActionReject
}

// outcome says what became of a decision: "approved c-3 (close_ticket) as
// alice via email", or a quorum's progress.
func outcome(res workflows.DecisionResult, it workflows.Interrupt, approver, via string) string {
	if res.Approver != "" {
		approver = res.Approver
	}
	tool, call := res.Tool, res.CallID
	if tool == "" {
		tool = it.Tool
	}
	if call == "" {
		call = it.CallID
	}
	suffix := ""
	if via != "" {
		suffix = " via " + via
	}
	if res.Decision == workflows.DecisionCounted {
		return fmt.Sprintf("counted the approval of %s (%s) by %s%s: %d of %d approvals; it waits for more", call, tool, approver, suffix, len(res.ApprovedBy), res.Needed)
	}
	return fmt.Sprintf("%s %s (%s) as %s%s", res.Decision, call, tool, approver, suffix)
}

// decideStatus is the status a refusal of the run is answered with.
func decideStatus(err error) int {
	switch {
	case errors.Is(err, client.ErrDigestMismatch), errors.Is(err, client.ErrAlreadyDecided), errors.Is(err, client.ErrRunClosed):
		return http.StatusConflict
	case errors.Is(err, client.ErrUnknownRun), errors.Is(err, client.ErrUnknownCall):
		return http.StatusNotFound
	case errors.Is(err, client.ErrUnauthorized):
		return http.StatusForbidden
	case errors.Is(err, client.ErrRefusedInput):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// quote is s quoted as Go quotes it, at most 200 bytes of it.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return strconv.Quote(s) + "…"
	}
	return strconv.Quote(s)
}
