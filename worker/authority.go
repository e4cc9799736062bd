package worker

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/workflows"
)

// connOf is conn, or without one the activity's own client and namespace:
// where a worker with no authority namespace claims and records.
func connOf(ctx context.Context, conn *authority.Conn) *authority.Conn {
	if conn != nil {
		return conn
	}
	return &authority.Conn{Client: activity.GetClient(ctx), Namespace: activity.GetInfo(ctx).Namespace}
}

// claimer is the ClaimActivity: it claims a run's use of a token or a link
// in the authority namespace (or, without one, the run's own), for the run
// and the local activity that claims.
type claimer struct{ conn *authority.Conn }

func (c claimer) claim(ctx context.Context, req workflows.ClaimRequest) error {
	info, conn := activity.GetInfo(ctx), connOf(ctx, c.conn)
	claimant := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	err := authority.Claim(ctx, conn.Client, conn.Namespace, req.WorkflowID, claimant)
	if errors.Is(err, authority.ErrUsed) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.UsedError, nil)
	}
	return err
}

// links is the LinksActivity: it keeps, of the links a delivery reports,
// those recorded for the run's wait in the authority namespace (or, without
// one, the run's own).
type links struct{ conn *authority.Conn }

func (l links) check(ctx context.Context, req workflows.LinksRequest) ([]workflows.LinkProof, error) {
	conn := connOf(ctx, l.conn)
	kept := []workflows.LinkProof{}
	for _, p := range req.Links {
		if len(kept) >= workflows.MaxLinkProofs {
			break
		}
		var rec workflows.LinkRecord
		err := authority.Lookup(ctx, conn.Client, conn.Namespace, workflows.LinkRecordPrefix+p.Digest, &rec)
		switch {
		case errors.Is(err, authority.ErrNoRecord):
			continue
		case err != nil:
			return nil, err
		}
		if rec.WorkflowID == req.WorkflowID && rec.CallID == req.CallID && rec.Asked == req.Asked &&
			rec.Recipient == p.Recipient && rec.Channel == p.Channel {
			kept = append(kept, p)
		}
	}
	return kept, nil
}

// deliverWith is the notify activity: n's delivery, given the worker's
// client of the authority namespace to record its links in (without one,
// the activity's own client and namespace).
func deliverWith(conn *authority.Conn, deliver func(context.Context, workflows.Notification) (workflows.Delivery, error)) func(context.Context, workflows.Notification) (workflows.Delivery, error) {
	return func(ctx context.Context, n workflows.Notification) (workflows.Delivery, error) {
		return deliver(authority.WithConn(ctx, connOf(ctx, conn)), n)
	}
}

// RegisterAuthority registers, on a worker of the authority namespace
// polling the runs' task queue, what lives there: the fleet ledger's
// workflow (with o's policy) and the marker workflow a pause's use is
// claimed with. Start does it when o.Authority is set; a worker you make
// yourself calls it on its second worker.
func RegisterAuthority(r Registry, o Options) {
	r.RegisterWorkflowWithOptions(workflows.StartMarker, workflow.RegisterOptions{Name: workflows.StartMarkerWorkflow})
	ledger.RegisterLedger(r, ledger.Config{Policy: o.Policy, UpdatesPerRun: o.LedgerUpdatesPerRun})
}

// pair is a worker of the runs and one of the authority namespace, started
// and stopped together; registrations go to the runs' worker.
type pair struct {
	sdkworker.Worker
	authority sdkworker.Worker
}

func (p pair) Start() error {
	if err := p.authority.Start(); err != nil {
		return fmt.Errorf("starting the authority namespace's worker: %w", err)
	}
	if err := p.Worker.Start(); err != nil {
		p.authority.Stop()
		return err
	}
	return nil
}

func (p pair) Run(interruptCh <-chan any) error {
	if err := p.Start(); err != nil {
		return err
	}
	<-interruptCh
	p.Stop()
	return nil
}

func (p pair) Stop() {
	p.Worker.Stop()
	p.authority.Stop()
}

// newAuthorityWorker is the worker of the authority namespace for taskQueue.
func newAuthorityWorker(c client.Client, taskQueue string, o Options) sdkworker.Worker {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{Interceptors: o.Interceptors})
	RegisterAuthority(w, o)
	return w
}
