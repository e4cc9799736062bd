package notify

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/workflows"
)

// A delivery tells the run of every link it sent, its earlier attempts'
// too (read from the activity's last heartbeat): a retry draws new links,
// and the old ones may be read already. A delivery that fails tells them as
// its error's details.
func TestDeliveryReportsEveryLinkItSent(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	earlier := workflows.LinkProof{Digest: workflows.LinkDigest("sent-by-attempt-1"), Recipient: "ops", Channel: ViaWebhook}

	srv, got := hookServer(t, http.StatusOK, "thanks")
	c := webhookConfig(srv.URL)
	withLinks(t, c)
	env := s.NewTestActivityEnvironment()
	env.SetHeartbeatDetails([]workflows.LinkProof{earlier})
	env.RegisterActivity(NewSender(c).Deliver)
	v, err := env.ExecuteActivity(NewSender(c).Deliver, waiting("ops"))
	require.NoError(t, err)
	var d workflows.Delivery
	require.NoError(t, v.Get(&d))
	<-got
	require.Len(t, d.Links, 2)
	assert.Equal(t, earlier, d.Links[0], "the earlier attempt's link")
	assert.Equal(t, "ops", d.Links[1].Recipient)
	assert.NotEqual(t, earlier.Digest, d.Links[1].Digest, "this attempt's own")

	down, _ := hookServer(t, http.StatusInternalServerError, "down")
	c = webhookConfig(down.URL)
	withLinks(t, c)
	env = s.NewTestActivityEnvironment()
	env.RegisterActivity(NewSender(c).Deliver)
	_, err = env.ExecuteActivity(NewSender(c).Deliver, waiting("ops"))
	ae := appErr(t, err)
	var links []workflows.LinkProof
	require.True(t, ae.HasDetails())
	require.NoError(t, ae.Details(&links))
	require.Len(t, links, 1, "a failed delivery's link may have reached its recipient: the run is told of it")
	assert.Equal(t, ViaWebhook, links[0].Channel)
}
