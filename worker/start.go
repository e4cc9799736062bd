package worker

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/toolgate/toolgate/connect"
)

// Start registers everything on a new worker for taskQueue, with o's
// interceptors, and starts it; with o.Authority, a second worker polls
// taskQueue in the authority namespace for the fleet ledger
// (RegisterAuthority), started and stopped with the first. Stop the
// returned worker when done.
func Start(c client.Client, taskQueue string, o Options) (sdkworker.Worker, error) {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{Interceptors: o.Interceptors})
	if err := Register(w, o); err != nil {
		return nil, err
	}
	if o.Authority != nil {
		w = pair{Worker: w, authority: newAuthorityWorker(o.Authority.Client, taskQueue, o)}
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

// Connect dials Temporal with s (package connect: the profile file,
// TEMPORAL_* variables and s's own settings, TLS, API key and encryption key
// file) and starts a worker for taskQueue with o on that client, and with a
// client of the authority namespace (connect.Conn.DialAuthority) unless
// o.Authority is set. edit, if not nil, adjusts the client options first
// (logger, metrics handler). A worker
// encrypts with a key file of its own or not at all: a codec endpoint in the
// profile is refused (connect.Settings.Worker). Stop the worker, then close
// the client.
func Connect(ctx context.Context, s connect.Settings, taskQueue string, o Options, edit func(*client.Options)) (client.Client, sdkworker.Worker, *connect.Conn, error) {
	s.Worker = true
	c, conn, err := connect.Dial(ctx, s, edit)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.DataConverter == nil {
		o.DataConverter, o.FailureConverter = conn.Options.DataConverter, conn.Options.FailureConverter
	}
	if o.Authority == nil {
		if o.Authority, err = conn.DialAuthority(ctx, c, edit); err != nil {
			c.Close()
			return nil, nil, nil, err
		}
	}
	w, err := Start(c, taskQueue, o)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return c, w, conn, nil
}
