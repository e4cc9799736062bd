package nexusserve

import (
	"errors"
	"fmt"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Registry is the part of a Temporal worker the service registers on.
type Registry interface {
	RegisterNexusService(*nexus.Service)
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the service, the call workflow and its activities on r.
func Register(r Registry, o Options) error {
	if o.Runs == nil {
		return errors.New("nexusserve: Options.Runs is nil: the service speaks to runs through a client")
	}
	svc, err := NewService(o)
	if err != nil {
		return err
	}
	r.RegisterNexusService(svc)
	r.RegisterWorkflowWithOptions(Call, workflow.RegisterOptions{Name: CallWorkflow})
	a := &activities{runs: o.Runs, window: AwaitWindow, poll: 5 * time.Second, namespace: o.Runs.Namespace()}
	r.RegisterActivityWithOptions(a.propose, activity.RegisterOptions{Name: ActivityPropose})
	r.RegisterActivityWithOptions(a.await, activity.RegisterOptions{Name: ActivityAwait})
	r.RegisterActivityWithOptions(a.withdraw, activity.RegisterOptions{Name: ActivityWithdraw})
	r.RegisterActivityWithOptions(a.look, activity.RegisterOptions{Name: ActivityLook})
	return nil
}

// Start starts a worker on taskQueue (TaskQueue if empty) that hosts the
// service: the target of a Nexus endpoint. Stop it when done.
func Start(tc sdkclient.Client, taskQueue string, o Options) (sdkworker.Worker, error) {
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	w := sdkworker.New(tc, taskQueue, sdkworker.Options{})
	if err := Register(w, o); err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the Nexus service's worker on task queue %s: %w", taskQueue, err)
	}
	return w, nil
}
