package worker

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// Start registers everything on a new worker for taskQueue, with o's
// interceptors, and starts it. Stop the returned worker when done.
func Start(c client.Client, taskQueue string, o Options) (sdkworker.Worker, error) {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{Interceptors: o.Interceptors})
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
