// Quickstart: your own tools behind toolgate's gate, on any Temporal server
// (`toolgate dev`, or TEMPORAL_ADDRESS=host:port): go run ./examples/quickstart
//
// A read tool and a destructive one, a worker for them, and a run that reads
// an order and cancels it: the run pauses at the gate until this program
// approves that exact call through toolgate's client.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// OrderArgs are both tools' arguments; the schema the planner sees comes from here.
type OrderArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, e.g. ORD-1"`
}

// Tools declares the tools over orders (id → status): one function each.
// Destructive is declared here, where a tool is registered, and nowhere else.
func Tools(orders *sync.Map) []tool.Tool {
	lookup := func(ctx context.Context, a OrderArgs) (map[string]any, error) {
		status, _ := orders.Load(a.OrderID)
		return map[string]any{"order_id": a.OrderID, "status": status}, nil
	}
	cancel := func(ctx context.Context, a OrderArgs) (map[string]any, error) {
		orders.Store(a.OrderID, "cancelled")
		return map[string]any{"order_id": a.OrderID, "status": "cancelled"}, nil
	}
	return []tool.Tool{
		tool.New(tool.Spec{Name: "lookup_order", Description: "Look an order up."}, lookup),
		tool.New(tool.Spec{Name: "cancel_order", Description: "Cancel an order.", Destructive: true, Invalidates: []string{"lookup_order"}}, cancel),
	}
}

// Run starts a worker for the tools on task queue "quickstart", runs the
// agent, approves the cancellation it pauses for, and returns the result.
func Run(ctx context.Context, tc client.Client, orders *sync.Map, out io.Writer) (workflows.RunResult, error) {
	w, err := worker.Start(tc, "quickstart", worker.Options{Tools: Tools(orders)})
	if err != nil {
		return workflows.RunResult{}, err
	}
	defer w.Stop()
	c := tgclient.New(tc, tgclient.WithTaskQueue("quickstart"))
	id, args := fmt.Sprintf("quickstart-%d", time.Now().UnixNano()), []byte(`{"order_id":"ORD-1"}`)
	steps := [][]tool.Proposal{{{Tool: "lookup_order", Args: args}}, {{Tool: "cancel_order", Args: args}}}
	in := workflows.RunInput{Goal: "cancel ORD-1", Planner: plan.Config{Kind: plan.KindScripted, Turns: steps, Answer: "ORD-1 is cancelled"}}
	if _, err := c.Start(ctx, id, in); err != nil {
		return workflows.RunResult{}, err
	}
	for st := (workflows.State{}); len(st.Interrupts) == 0; time.Sleep(100 * time.Millisecond) {
		if st, err = c.State(ctx, id); err != nil {
			return workflows.RunResult{}, err
		}
		for _, it := range st.Interrupts { // the run waits for a human: decide this exact call
			fmt.Fprintf(out, "%s waits for a human: %s %s\n", it.CallID, it.Tool, it.CallArgs)
			outs, err := c.Approve(ctx, id, tgclient.As("quickstart"), it.CallID) // bound to it.ArgsDigest
			if err != nil || outs[0].Err != nil {
				return workflows.RunResult{}, fmt.Errorf("approving: %v %v", err, outs)
			}
			fmt.Fprintln(out, outs[0])
		}
	}
	return c.Result(ctx, id)
}

func main() {
	// The temporal CLI's profile, TEMPORAL_* variables (address, API key, TLS):
	// by default 127.0.0.1:7233.
	tc, _, err := connect.Dial(context.Background(), connect.Settings{}, nil)
	var res workflows.RunResult
	if err == nil {
		defer tc.Close()
		orders := &sync.Map{}
		orders.Store("ORD-1", "paid")
		res, err = Run(context.Background(), tc, orders, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
	for _, r := range res.Trace {
		fmt.Printf("%s %-13s %-9s %s\n", r.CallID, r.Tool, r.Status, r.Result)
	}
	fmt.Println(res.Status+":", res.Answer)
}
