package audit

import (
	"fmt"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// This file audits what rules version 9 adds: a decision by link counts
// only with the secret of a link one of the run's deliveries sent for that
// wait (its toolgate.notify activity's result, or its failure's details,
// hold the links' digests); a fork keeps its source's requester, which the
// fork activity's result holds, and bars its forkers.

// versionTrust3 is the rules version of the trust boundary's third pass.
const versionTrust3 = 9

// sentLinks are the links one delivery reported: for which wait, when.
type sentLinks struct {
	eventID int64 // the event that reported them
	callID  string
	asked   int64 // the wait's requested_at, Unix nanoseconds
	proofs  []workflows.LinkProof
}

// scheduled keeps what the auditor needs of toolgate's own activities when
// they are scheduled: a notification (its wait), a fork's start.
func (a *auditor) scheduled(id int64, s *historypb.ActivityTaskScheduledEventAttributes) {
	switch s.GetActivityType().GetName() {
	case workflows.NotifyActivity:
		var n workflows.Notification
		if decodePayload(s.GetInput(), &n) == nil && n.Event == workflows.NotifyWaiting {
			a.notifies[id] = n
		}
	case workflows.ForkActivity:
		a.forkAt = id
	}
}

// activityDone takes what one of toolgate's activities reported: the links
// a delivery sent (its result, or its failure's details), a fork's source.
func (a *auditor) activityDone(id, scheduled int64, result *commonpb.Payloads, failure *failureDetails) {
	if n, ok := a.notifies[scheduled]; ok {
		var proofs []workflows.LinkProof
		switch {
		case result != nil:
			var d workflows.Delivery
			if decodePayload(result, &d) == nil {
				proofs = d.Links
			}
		case failure != nil && failure.details != nil:
			_ = decodePayload(failure.details, &proofs)
		}
		if len(proofs) > 0 {
			a.links = append(a.links, sentLinks{eventID: id, callID: n.CallID, asked: n.RequestedAt.UnixNano(), proofs: proofs})
		}
		return
	}
	if scheduled == a.forkAt && result != nil && a.version >= versionTrust3 {
		var st workflows.ForkState
		if decodePayload(result, &st) == nil {
			a.reqBy, a.forkers = st.State.RequestedBy, slices.Clone(st.State.ForkedBy)
		}
	}
}

// failureDetails are the details an activity's failure carries: an
// application error's, or a timeout's last heartbeat's.
type failureDetails struct{ details *commonpb.Payloads }

// linkSent checks a decision by link, verified at event before: the run
// sent a link for its wait whose secret it carries, through its channel,
// and by e-mail to its approver.
func (a *auditor) linkSent(c signed.Claims, before int64) error {
	if c.Link == "" {
		return fmt.Errorf("a decision by link (via %s) with no link secret: the run takes one only with the secret of a link it sent", c.Via)
	}
	digest := workflows.LinkDigest(c.Link)
	for _, s := range a.links {
		if s.eventID >= before || s.callID != c.CallID || s.asked != c.Asked {
			continue
		}
		for _, p := range s.proofs {
			if p.Digest == digest && p.Channel == c.Via && (c.Via != policy.ViaEmail || p.Recipient == c.Approver) {
				return nil
			}
		}
	}
	return fmt.Errorf("a decision by link (via %s) whose link no delivery of this run sent for call %s's wait: a link made with the link key alone decides nothing", c.Via, c.CallID)
}

// barred says whether name may decide none of the run's calls: its
// requester, or (rules version 9) one who forked it.
func (a *auditor) barred(name string) bool {
	return name != "" && (name == a.reqBy || slices.Contains(a.forkers, name))
}

// barredAs says why a barred name is: "requested" or "forked".
func (a *auditor) barredAs(name string) string {
	if name == a.reqBy {
		return "requested"
	}
	return "forked"
}
