package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/policy"
)

// This file makes a decision by link prove that the run sent the link
// (rules version 9). A link token is signed with the workers' link key, and
// every worker host holds that key: with it alone anyone could make a link
// for any approver of any waiting call. So the delivery that sends a link
// also draws a random secret for it, puts the secret in the link and gives
// the run only its digest (Delivery.Links), which the waiting call keeps. A
// decision by link (DecisionInput.Via) must carry a secret whose digest the
// call keeps for this wait, for its channel and — by e-mail, where the link
// names a person — its approver. A link the run never sent decides nothing.

// takeLinks keeps, on the waiting call a delivery was for, the links it
// sent. A delivery for a wait that has ended (decided, or asked anew) is
// kept by nobody. It returns how many links were past MaxLinkProofs.
func (r *run) takeLinks(n Notification, links []LinkProof) int {
	if len(links) == 0 {
		return 0
	}
	for _, p := range r.pending {
		if p.CallID != n.CallID || !p.RequestedAt.Equal(n.RequestedAt) || p.decided {
			continue
		}
		dropped := 0
		for _, l := range links {
			switch {
			case !validLink(l):
				dropped++
			case len(p.links) >= MaxLinkProofs:
				dropped++
			default:
				p.links = append(p.links, l)
			}
		}
		return dropped
	}
	return 0
}

// validLink tells a link proof the run can keep: a digest of LinkDigest's
// form, a channel a decision may come through, a recipient named within
// bounds.
func validLink(l LinkProof) bool {
	if len(l.Digest) != 32 || l.Recipient == "" || len(l.Recipient) > MaxNameBytes {
		return false
	}
	for _, c := range l.Digest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return l.Channel == policy.ViaSlack || l.Channel == policy.ViaEmail || l.Channel == ViaWebhook
}

// checkLink makes sure decision d by link came through a link the run sent
// for p's wait: its secret's digest is one p keeps, for its channel and, by
// e-mail, for its approver (a Slack message's or a webhook's link names a
// target; who clicked is who Slack signs for, or the target).
func (r *run) checkLink(p *pending, d ruling) error {
	if d.via == "" {
		return nil
	}
	if d.link == "" {
		return refusal(RefusedUnauthorized, "decision by link (via %s) refused: it carries no link secret — a decision by link counts only with the secret of a link the run sent for this wait (the confirm page and the Slack buttons send it)", d.via)
	}
	digest := LinkDigest(d.link)
	for _, l := range p.links {
		if l.Digest == digest && l.Channel == d.via && (d.via != policy.ViaEmail || l.Recipient == d.by) {
			return nil
		}
	}
	to := ""
	if d.via == policy.ViaEmail {
		to = " to " + d.by
	}
	return refusal(RefusedUnauthorized, "decision by link refused: this run sent no %s link%s with this secret for call %s's wait of %s — "+
		"a link decides only if the run sent it (one made with the link key alone decides nothing); decide in the inbox or with toolgate approve",
		d.via, to, p.CallID, p.RequestedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// deliveredLinks are the links a delivery's outcome reports: its result's,
// or, failed, its error's details (the last attempt's, with every earlier
// attempt's) or its last heartbeat's (a delivery whose worker died).
func deliveredLinks(d Delivery, err error) []LinkProof {
	if err == nil {
		return d.Links
	}
	var links []LinkProof
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.HasDetails() && ae.Details(&links) == nil {
		return links
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&links) == nil {
		return links
	}
	return nil
}

// linksNote says, for the trace, how many links a delivery sent and how
// many of them the run could not keep.
func linksNote(links []LinkProof, dropped int) string {
	switch {
	case len(links) == 0:
		return ""
	case dropped > 0:
		return fmt.Sprintf("; %s, %d of them not kept (at most %d a wait, each named and of a known channel): those decide nothing", text.Count(len(links), "link"), dropped, MaxLinkProofs)
	}
	return "; " + text.Count(len(links), "link")
}

// A delivery's result is no proof of what it sent:
// anyone who may complete its activity by id (any client of a stock
// server) writes that result. The worker records each link in the
// authority namespace before it sends it (LinkRecordPrefix + the digest of
// its secret: what run, call and wait it is for, to whom, through which
// channel), and the run keeps only the links a local activity of its
// worker finds recorded so (LinksActivity).

// LinkRecordPrefix starts the workflow id of a link's record.
const LinkRecordPrefix = "toolgate-link-"

// LinksActivity is the local activity that keeps, of the links a delivery
// reports (LinksRequest), those recorded for this run's wait.
const LinksActivity = "toolgate.links"

// LinkRecord is what a link's record says: the run, call and wait it was
// sent for, and to whom through which channel.
type LinkRecord struct {
	WorkflowID string `json:"workflow_id"`
	CallID     string `json:"call_id"`
	Asked      int64  `json:"asked"` // the wait's requested_at, Unix nanoseconds
	Recipient  string `json:"to"`
	Channel    string `json:"via"`
	Expires    int64  `json:"exp"` // Unix seconds
}

// LinksRequest asks which of Links are recorded for the wait.
type LinksRequest struct {
	WorkflowID string      `json:"workflow_id"`
	CallID     string      `json:"call_id"`
	Asked      int64       `json:"asked"`
	Links      []LinkProof `json:"links"`
}

// recordedLinks is, of the links delivery n reports, those its worker
// recorded for n's wait, and how many it drops.
func (r *run) recordedLinks(ctx workflow.Context, n Notification, links []LinkProof) ([]LinkProof, int) {
	if len(links) == 0 {
		return links, 0
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second},
	})
	var kept []LinkProof
	req := LinksRequest{WorkflowID: n.WorkflowID, CallID: n.CallID, Asked: n.RequestedAt.UnixNano(), Links: links}
	err := workflow.ExecuteLocalActivity(lctx, LinksActivity, req).Get(ctx, &kept)
	r.localSince++
	if err != nil {
		r.logger.Warn("the links a delivery reports could not be checked against their records: none is kept", "error", err)
		return nil, len(links)
	}
	if len(kept) > len(links) {
		kept = kept[:len(links)]
	}
	return kept, len(links) - len(kept)
}
