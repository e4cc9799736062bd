package confirm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/workflows"
)

// recordsFake is the fake Backend that also reads link records, as a
// *client.Client reads them from the authority namespace.
type recordsFake struct {
	*fake
	records map[string]workflows.LinkRecord // by the link's secret
}

func (r recordsFake) LinkRecord(_ context.Context, secret string) (workflows.LinkRecord, error) {
	rec, ok := r.records[secret]
	if !ok {
		return rec, fmt.Errorf("%w: %s", authority.ErrNoRecord, workflows.LinkRecordPrefix+workflows.LinkDigest(secret))
	}
	return rec, nil
}

// A listener that reads the authority namespace refuses, before it signs
// anything, a link no worker recorded before sending it, and one whose
// record names another wait or recipient; a recorded link decides.
func TestAListenerTakesOnlyARecordedLink(t *testing.T) {
	x := newFixture(t, false)
	asked := x.it.RequestedAt.UnixNano()
	rf := recordsFake{fake: x.f, records: map[string]workflows.LinkRecord{
		"sent":         {WorkflowID: "run-1", CallID: "c-3", Asked: asked, Recipient: "alice", Channel: notify.ViaEmail},
		"sent-to-bob":  {WorkflowID: "run-1", CallID: "c-3", Asked: asked, Recipient: "bob", Channel: notify.ViaEmail},
		"earlier-wait": {WorkflowID: "run-1", CallID: "c-3", Asked: asked - 1, Recipient: "alice", Channel: notify.ViaEmail},
	}}
	nc := &notify.Config{}
	nc.SetLinkKey(x.linkKey)
	srv := httptest.NewServer(New(rf, Options{Notify: nc, Now: func() time.Time { return x.now }}))
	t.Cleanup(srv.Close)
	link := func(secret string) string {
		tok, err := notify.SignLink(x.linkKey, notify.Link{WorkflowID: "run-1", CallID: "c-3", ArgsDigest: x.it.ArgsDigest, Asked: asked,
			Recipient: "alice", Channel: notify.ViaEmail, Expires: x.now.Add(time.Hour), Secret: secret}, x.now)
		require.NoError(t, err)
		return tok
	}
	x.srv = srv // the fixture's requests go to this listener
	post := func(secret string) (int, string) {
		return x.post(url.Values{"t": {link(secret)}, "decision": {"approve"}})
	}
	for secret, want := range map[string]string{
		"never-recorded": "this link has no record in the authority namespace: no toolgate worker sent it",
		"sent-to-bob":    `this link's record names another wait (run "run-1", call "c-3", for "bob" by "email")`,
		"earlier-wait":   "this link's record names another wait",
	} {
		status, body := post(secret)
		assert.Equal(t, http.StatusForbidden, status, "%s: %s", secret, body)
		assert.Contains(t, unesc(body), want, secret)
		assert.Contains(t, unesc(body), "nothing was decided", secret)
	}
	x.mustNotDecide("links no worker recorded for this wait and recipient")
	status, body := post("sent")
	require.Equal(t, http.StatusOK, status, body)
	_, acted := x.f.calls()
	require.Len(t, acted, 1)
	assert.Equal(t, "alice", acted[0].In.Approver)
}
