package worker

import (
	"context"
	"fmt"
	"path/filepath"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/activities/desk"
	openaiplanner "github.com/toolgate/toolgate/activities/openai"
	"github.com/toolgate/toolgate/activities/support"
	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/plan"
)

// DeskFile is the demo desk's database file name under a data directory.
const DeskFile = "desk.db"

// Demo returns the options of toolgate's own worker: the demo support desk
// (its SQLite file under dataDir) and the support and OpenAI planners. Close
// the returned desk when the worker stops.
func Demo(dataDir string) (Options, *desk.Desk, error) {
	if err := private.Dir(dataDir); err != nil {
		return Options{}, nil, fmt.Errorf("creating data directory: %w", err)
	}
	d, err := desk.Open(filepath.Join(dataDir, DeskFile))
	if err != nil {
		return Options{}, nil, err
	}
	return Options{
		Tools: d.Tools(),
		Planners: map[string]PlanFunc{
			plan.KindSupport: support.Plan,
			plan.KindOpenAI:  openaiplanner.New(openaiplanner.OptionsFromEnv()).Plan,
		},
	}, d, nil
}

// Start registers everything on a new worker for taskQueue and starts it.
// Stop the returned worker when done.
func Start(c client.Client, taskQueue string, o Options) (sdkworker.Worker, error) {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	if err := Register(w, o); err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting worker on task queue %s: %w", taskQueue, err)
	}
	return w, nil
}

// Ready blocks until the server answers on c (a worker can then poll).
func Ready(ctx context.Context, c client.Client) error {
	_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
