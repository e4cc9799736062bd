// Quickstart: your own tools behind toolgate's gate, on any Temporal server
// (`toolgate dev`, or TEMPORAL_ADDRESS=host:port): go run ./examples/quickstart
//
// A read tool and a destructive one, a worker for them, and a run that reads
// an order and cancels it: the run pauses at the gate until this program
// approves that exact call through toolgate's client. The README's "Go
// teams" shows the lines between the README:begin and README:end markers
// below, word for word (testsuite/readme checks it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// README:begin
type orderArgs struct { // both tools' arguments: the schema the planner sees comes from here
	OrderID string `json:"order_id" jsonschema:"the order's id, e.g. ORD-1"`
}

// Run serves the tools, runs an agent that cancels ORD-1, approves that call, returns the result.
func Run(ctx context.Context, tc client.Client, orders *sync.Map, out io.Writer) (workflows.RunResult, error) {
	lookup := func(ctx context.Context, a orderArgs) (map[string]any, error) {
		status, _ := orders.Load(a.OrderID)
		return map[string]any{"order_id": a.OrderID, "status": status}, nil
	}
	cancel := func(ctx context.Context, a orderArgs) (map[string]any, error) {
		orders.Store(a.OrderID, "cancelled")
		return map[string]any{"order_id": a.OrderID, "status": "cancelled"}, nil
	}
	tools := []tool.Tool{ // Destructive is declared here, where a tool is registered, and nowhere else
		tool.New(tool.Spec{Name: "lookup_order", Description: "Look an order up."}, lookup),
		tool.New(tool.Spec{Name: "cancel_order", Description: "Cancel an order.", Destructive: true,
			Invalidates: []string{"lookup_order"}}, cancel),
	}
	w, err := worker.Start(tc, "quickstart", worker.Options{Tools: tools})
	if err != nil {
		return workflows.RunResult{}, err
	}
	defer w.Stop()
	c := tgclient.New(tc, tgclient.WithTaskQueue("quickstart"))
	id, args := fmt.Sprintf("quickstart-%d", time.Now().UnixNano()), json.RawMessage(`{"order_id":"ORD-1"}`)
	steps := [][]tool.Proposal{{{Tool: "lookup_order", Args: args}}, {{Tool: "cancel_order", Args: args}}}
	planner := plan.Config{Kind: plan.KindScripted, Turns: steps, Answer: "ORD-1 is cancelled"} // scripted; or plan.KindOpenAI
	if _, err := c.Start(ctx, id, workflows.RunInput{Goal: "cancel ORD-1", Planner: planner}); err != nil {
		return workflows.RunResult{}, err
	}
	st, err := c.AwaitDecision(ctx, id) // returns once a call waits for a human: cancel_order, at the gate
	if err != nil {
		return workflows.RunResult{}, err
	}
	it := st.Interrupts[0] // the call, its exact arguments and their args_digest
	fmt.Fprintf(out, "%s waits for a human: %s %s\n", it.CallID, it.Tool, it.CallArgs)
	res, err := c.Decide(ctx, id, true, workflows.DecisionInput{CallID: it.CallID, Approver: "quickstart",
		ArgsDigest: it.ArgsDigest, Kind: it.Kind}) // approves exactly the arguments shown, or is refused
	if err != nil {
		return workflows.RunResult{}, fmt.Errorf("approving %s: %w", it.CallID, err)
	}
	fmt.Fprintf(out, "%s %s (%s) by %s\n", res.Decision, res.CallID, res.Tool, res.Approver)
	return c.Result(ctx, id)
}

// tc is any Temporal client: connect.Dial(ctx, connect.Settings{}, nil) dials the temporal CLI's.
// README:end

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the program: its output on stdout; the Temporal SDK's own logs, at
// -log-level (warn: quiet unless something is wrong), and any error on
// stderr. It returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	level := fs.String("log-level", "warn", "the Temporal SDK's logs on stderr: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "quickstart: -log-level %q: want debug, info, warn or error\n", *level)
		return 2
	}
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})))
	// The temporal CLI's profile, TEMPORAL_* variables (address, API key, TLS):
	// by default 127.0.0.1:7233.
	tc, _, err := connect.Dial(context.Background(), connect.Settings{}, func(o *client.Options) { o.Logger = logger })
	var res workflows.RunResult
	if err == nil {
		defer tc.Close()
		orders := &sync.Map{}
		orders.Store("ORD-1", "paid")
		res, err = Run(context.Background(), tc, orders, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "quickstart:", err)
		return 1
	}
	for _, r := range res.Trace {
		fmt.Fprintf(stdout, "%s %-13s %-9s %s\n", r.CallID, r.Tool, r.Status, r.Result)
	}
	fmt.Fprintln(stdout, res.Status+":", res.Answer)
	return 0
}
