package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/workflows"
)

// This file draws each link's secret and tells the run what it sent. A link
// token is signed with the link key every worker host holds, so the
// signature alone proves nothing a host's attacker could not make: the
// secret does. Each link gets 32 random bytes, in the link only; the run is
// told their digest (workflows.LinkProof), in the delivery's result — every
// attempt's, since a retry sends new links and the old ones may already be
// read — and takes a decision by link only with a secret it was told of.

// secretBytes is the size of a link's secret.
const secretBytes = 32

// SentLink is one link a delivery sends: its token (a Slack button's value),
// the confirm page's URL, and what the run keeps of it.
type SentLink struct {
	Token   string
	URL     string
	Proof   workflows.LinkProof
	Expires time.Time
}

// LinkFor is the link for n sent to recipient through channel, issued at
// now, with a fresh random secret; the zero SentLink when the file sets no
// link_base or link key, or n is not a waiting call's.
func (c *Config) LinkFor(n workflows.Notification, recipient, channel string, now time.Time) (SentLink, error) {
	if c.LinkBase == "" || c.LinkKey() == nil || n.Event != workflows.NotifyWaiting || n.CallID == "" || n.ArgsDigest == "" || n.RequestedAt.IsZero() {
		return SentLink{}, nil
	}
	exp := n.ExpiresAt
	if exp.IsZero() { // the call waits with no deadline: the link's own bounds it
		exp = now.Add(MaxLinkLifetime)
	}
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return SentLink{}, fmt.Errorf("link for %s: drawing its secret: %w", recipient, err)
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	token, err := SignLink(c.LinkKey(), Link{WorkflowID: n.WorkflowID, CallID: n.CallID, ArgsDigest: n.ArgsDigest,
		Asked: n.RequestedAt.UnixNano(), Recipient: recipient, Channel: channel, Expires: exp, Secret: secret}, now)
	if err != nil {
		return SentLink{}, fmt.Errorf("link for %s: %w", recipient, err)
	}
	return SentLink{Token: token, URL: strings.TrimRight(c.LinkBase, "/") + "/confirm?t=" + url.QueryEscape(token),
		Proof: workflows.LinkProof{Digest: workflows.LinkDigest(secret), Recipient: recipient, Channel: channel}, Expires: exp}, nil
}

// linkLog is what one delivery has sent of links, its earlier attempts'
// included (read from the activity's last heartbeat), which it heartbeats
// as it goes, so a delivery whose worker dies still tells the run.
type linkLog struct {
	ctx    context.Context
	mu     sync.Mutex
	proofs []workflows.LinkProof
}

// newLinkLog is the log of the delivery ctx runs: with its earlier
// attempts' links when ctx is a retried activity's.
func newLinkLog(ctx context.Context) *linkLog {
	l := &linkLog{ctx: ctx}
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		var prior []workflows.LinkProof
		if activity.GetHeartbeatDetails(ctx, &prior) == nil && len(prior) <= workflows.MaxLinkProofs {
			l.proofs = prior
		}
	}
	return l
}

// add records a link about to be sent, and heartbeats the log.
func (l *linkLog) add(p workflows.LinkProof) {
	if l == nil || p.Digest == "" {
		return
	}
	l.mu.Lock()
	if len(l.proofs) < workflows.MaxLinkProofs {
		l.proofs = append(l.proofs, p)
	}
	l.mu.Unlock()
	l.heartbeat()
}

// list is what the log holds.
func (l *linkLog) list() []workflows.LinkProof {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]workflows.LinkProof(nil), l.proofs...)
}

// heartbeat records the activity's heartbeat, with the links sent so far.
func (l *linkLog) heartbeat() {
	if activity.IsActivity(l.ctx) {
		activity.RecordHeartbeat(l.ctx, l.list())
	}
}

// heartbeating heartbeats the log every workflows.NotifyHeartbeat/3 until
// the returned stop is called: a delivery whose worker died is tried again
// on another within workflows.NotifyHeartbeat, not at the end of its
// start-to-close timeout.
func (l *linkLog) heartbeating() (stop func()) {
	if !activity.IsActivity(l.ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(workflows.NotifyHeartbeat / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				l.heartbeat()
			case <-done:
				return
			case <-l.ctx.Done():
				return
			}
		}
	}()
	return func() { close(done) }
}

// linkFor is LinkFor at s's time, its error a refusal; the link is logged
// as sent.
func (s *Sender) linkFor(lg *linkLog, n workflows.Notification, recipient, channel string) (SentLink, error) {
	l, err := s.c.LinkFor(n, recipient, channel, s.now())
	if err != nil {
		return SentLink{}, refused("%v", err)
	}
	if l.Proof.Digest != "" {
		if err := recordLink(lg.ctx, n, l); err != nil {
			return SentLink{}, err // retried: a link the run cannot find recorded decides nothing
		}
	}
	lg.add(l.Proof)
	return l, nil
}

// recordLink records link l of delivery n in the authority namespace
// before it is sent (workflows.LinkRecord): the run keeps a link only with
// its record (rules version 13). A toolgate worker gives every delivery
// the client to record with (authority.WithConn: its authority namespace,
// or its own); a Sender called otherwise (a test of the sender) records
// nothing, and a run would keep none of its links.
func recordLink(ctx context.Context, n workflows.Notification, l SentLink) error {
	conn := authority.ConnFrom(ctx)
	if conn == nil {
		return nil
	}
	claimant := l.Proof.Digest
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		claimant = info.WorkflowExecution.RunID + "/" + info.ActivityID + "/" + l.Proof.Digest
	}
	rec := workflows.LinkRecord{WorkflowID: n.WorkflowID, CallID: n.CallID, Asked: n.RequestedAt.UnixNano(),
		Recipient: l.Proof.Recipient, Channel: l.Proof.Channel, Expires: l.Expires.Unix()}
	if err := authority.Record(ctx, conn.Client, conn.Namespace, workflows.LinkRecordPrefix+l.Proof.Digest, claimant, rec); err != nil {
		return fmt.Errorf("recording the link for %s before sending it: %w", l.Proof.Recipient, err)
	}
	return nil
}
