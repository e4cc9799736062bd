package main

import (
	"context"
	"errors"
	"fmt"

	sdkclient "go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/nexusserve"
)

// nexusUsage is how `toolgate nexus` is used.
const nexusUsage = `usage: toolgate nexus endpoint create NAME [--target-namespace NS] [--task-queue Q] [CONNECTION]
       toolgate nexus sign-start --run NAME --as APPROVER --key FILE [--goal TEXT | --plan FILE] [--valid-for D]`

// nexus is `toolgate nexus endpoint create …` and `toolgate nexus sign-start …`.
func (c *cli) nexus(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(nexusUsage)
	}
	switch args[0] {
	case "endpoint":
		switch {
		case len(args) == 2 && isHelpArg(args[1]):
			return c.help(ctx, []string{"nexus", "endpoint"}) // toolgate nexus endpoint --help
		case len(args) < 2 || args[1] != "create":
			return errors.New(nexusUsage)
		}
		return c.nexusEndpointCreate(ctx, args[2:])
	case "sign-start":
		return c.nexusSignStart(args[1:])
	}
	return fmt.Errorf("unknown nexus command %.40q\n%s", args[0], nexusUsage)
}

// checkEndpointName refuses a name Temporal would refuse for an endpoint,
// before anything starts; flag names the flag or argument that gave it.
func checkEndpointName(flag, name string) error {
	if err := nexusserve.CheckEndpointName(name); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// nexusEndpointCreate is `toolgate nexus endpoint create NAME`: the endpoint
// NAME, routing to the Nexus service's worker (toolgate worker --nexus), on
// any Temporal server.
func (c *cli) nexusEndpointCreate(ctx context.Context, args []string) error {
	fs := c.flags("nexus endpoint create")
	cn := c.connFlags(fs)
	target := fs.String("target-namespace", "", "the namespace of the worker that hosts the service (empty: the connection's, --namespace)")
	tq := fs.String("task-queue", nexusserve.TaskQueue, "the task queue of that worker (toolgate worker --nexus --nexus-task-queue Q)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: toolgate nexus endpoint create NAME [--target-namespace NS] [--task-queue Q] [CONNECTION]")
	}
	if err := checkEndpointName("endpoint name", pos[0]); err != nil {
		return err
	}
	if *tq == "" {
		return errors.New("--task-queue is empty: give the task queue of the worker that hosts the service (toolgate worker --nexus: " + nexusserve.TaskQueue + ")")
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	ns := *target
	if ns == "" {
		ns = conn.Namespace()
	}
	ep, err := nexusserve.CreateEndpoint(ctx, tc, pos[0], ns, *tq)
	if err != nil {
		return endpointError(err)
	}
	how := "already there, unchanged"
	if ep.Created {
		how = "created"
	}
	fmt.Fprintf(c.stdout, "%s: %s\n", endpointLine(ep), how)
	fmt.Fprintf(c.stderr, "its calls go to the worker of `toolgate worker --nexus --namespace %s --nexus-task-queue %s` (run it against this server)\n", ns, *tq)
	return nil
}

// endpointLine describes an endpoint as dev and nexus endpoint create print it.
func endpointLine(ep nexusserve.Endpoint) string {
	return fmt.Sprintf("Nexus endpoint %s -> namespace %s, task queue %s (service %s: %s, %s)",
		ep.Name, ep.Namespace, ep.TaskQueue, nexusserve.ServiceName, nexusserve.OperationCall, nexusserve.OperationRun)
}

// endpointError adds what to do to a refusal of the server's to create an
// endpoint.
func endpointError(err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("%w (creating a Nexus endpoint takes an operator's rights on the whole cluster: connect as its admin)", err)
	case codes.Unimplemented:
		return fmt.Errorf("%w (this server creates no Nexus endpoints through its operator service: on Temporal Cloud, create it with `tcld nexus endpoint create` or in the Cloud UI)", err)
	}
	return err
}

// startNexus starts the worker that hosts the toolgate Nexus service on
// taskQueue of tc (whose connection is conn), speaking to the runs on
// runQueue; policy: their worker has an approval policy, so the service
// starts runs only signed.
func startNexus(tc sdkclient.Client, conn *connect.Conn, taskQueue, runQueue string, policy bool) (sdkworker.Worker, error) {
	runs := tgclient.New(tc, tgclient.WithTaskQueue(runQueue), tgclient.WithConnection(conn))
	return nexusserve.Start(tc, taskQueue, nexusserve.Options{Runs: runs, RunQueue: runQueue, Policy: policy})
}

// warnNexusEncrypted says, when the worker encrypts payloads (keyFile), that
// the Nexus callers get the operations' results encrypted too.
func (c *cli) warnNexusEncrypted(keyFile string) {
	if keyFile != "" {
		fmt.Fprintf(c.stderr, "note: the Nexus service answers with this worker's data converter: its callers get the operations' inputs and results "+
			"encrypted with %s's key, and read them only with the same codec\n", keyFile)
	}
}

// checkWorkerNexus checks toolgate worker's --nexus flags: the task queue of
// the Nexus service's worker (queueGiven: set on the command line) is not
// empty, and not the one of the runs (runQueue), whose worker would be given
// the service's workflows, which it does not have.
func checkWorkerNexus(nexus, queueGiven bool, queue, runQueue string) error {
	switch {
	case !nexus && queueGiven:
		return errors.New("--nexus-task-queue goes with --nexus")
	case !nexus:
		return nil
	case queue == "":
		return errors.New("--nexus-task-queue is empty: give the task queue the Nexus endpoint routes to (default " + nexusserve.TaskQueue + ")")
	case queue == runQueue:
		return fmt.Errorf("--nexus-task-queue %s is the runs' task queue (--task-queue): the Nexus service's worker needs a task queue of its own", queue)
	}
	return nil
}
