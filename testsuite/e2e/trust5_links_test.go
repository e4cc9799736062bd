package e2e

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// Item 1 of issue 44: a forged delivery decides nothing. On a server where
// any client may complete an activity by id (a stock server: this stack's
// has no authorizer), the attacker holds the workers' link key, completes
// the run's in-flight webhook delivery with a link of its own making, and
// clicks that link: the run keeps no link its worker did not record in the
// authority namespace before sending it, so the click is refused and the
// call still waits; the webhook's real link, recorded, decides. The
// listener itself refuses the forged link before it signs anything (it
// finds no record); one that cannot read the records signs it, and the run
// refuses it.
func TestAForgedDeliveryDecidesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := newNotifyRig(t, "events: [waiting]")
	release := r.hook.hold(t) // the webhook's delivery stays in flight
	r.serve(s, nil)
	const id = "trust5-forged-delivery"
	it := startWaiting(s, id)
	testenv.Eventually(t, notifyTimeout, "the webhook's delivery in flight", func() error {
		if len(r.hook.requests("/hook")) == 0 {
			return fmt.Errorf("no webhook request yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	desc, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	var activityID string
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() == workflows.NotifyActivity && strings.HasSuffix(pa.GetActivityId(), "-ops") {
			activityID = pa.GetActivityId()
		}
	}
	if activityID == "" {
		t.Fatalf("no webhook delivery in flight: %v", desc.GetPendingActivities())
	}
	const secret = "chosen-by-the-attacker"
	forged := workflows.Delivery{Target: "ops", Kind: "webhook", Detail: "HTTP 200",
		Links: []workflows.LinkProof{{Digest: workflows.LinkDigest(secret), Recipient: "ops", Channel: notify.ViaWebhook}}}
	if err := s.client.CompleteActivityByID(ctx, devserver.DefaultNamespace, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), activityID, forged, nil); err != nil {
		t.Fatalf("completing the delivery by id, as any client of a stock server may: %v", err)
	}
	var taken string
	testenv.Eventually(t, waitTimeout, "the forged delivery taken", func() error {
		for _, rec := range records(s.mustTrace(id), "c-1", workflows.TraceNotified) {
			if strings.HasPrefix(rec.Reason, "ops (webhook)") {
				taken = rec.Reason
				return nil
			}
		}
		return fmt.Errorf("the webhook's delivery not recorded as done yet")
	})
	forgedLink := forgeLink(t, r.linkKey, id, it, "ops", notify.ViaWebhook, secret)
	status, body := r.confirmPost(forgedLink, "approve", "ok")
	if status != http.StatusForbidden || !strings.Contains(html.UnescapeString(body), "this link has no record in the authority namespace: no toolgate worker sent it") {
		t.Fatalf("the forged delivery's link: HTTP %d, want the listener's refusal (no record):\n%s", status, body)
	}
	// A listener that cannot read the authority namespace signs the click;
	// the run refuses it all the same.
	status, body = r.bareConfirmPost(forgedLink, "approve", "ok")
	if status == http.StatusOK || !strings.Contains(body, "decision by link refused") {
		t.Fatalf("the forged delivery's link through a listener that reads no record: HTTP %d, want the run's refusal:\n%s", status, body)
	}
	if !strings.Contains(taken, "have no record in the authority namespace") {
		t.Fatalf("the trace of the forged delivery: %q, want it to say its link has no record", taken)
	}
	if st := s.mustState(id); len(st.Interrupts) != 1 {
		t.Fatalf("after the forged link: %+v, want c-1 still waiting", st.Interrupts)
	}
	release()
}

// runOnly is a listener's backend that reads runs and decides, but reads
// no link record: a listener with no access to the authority namespace.
type runOnly struct{ c *tgclient.Client }

func (r runOnly) State(ctx context.Context, id string) (workflows.State, error) {
	return r.c.State(ctx, id)
}

func (r runOnly) Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...tgclient.DecideOption) (workflows.DecisionResult, error) {
	return r.c.Decide(ctx, id, approve, in, opts...)
}
