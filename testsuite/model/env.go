package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/activities/desk"
	openaiplanner "github.com/toolgate/toolgate/activities/openai"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

const (
	// APIKey is the made-up key the worker's planner is given. The fake
	// accepts only this key; it must never show up in a run's history.
	APIKey = "sk-test-tg7Qm2VxR9pLk4NcW8sJd3HfBz6Y"
	// ModelName is the model the runs ask for.
	ModelName = "gpt-test"
	// Identity names the client and worker in the histories they write
	// (instead of the machine's host name).
	Identity = "toolgate-model-suite"
)

// Env is a real Temporal server (embedded, SQLite), a client, the demo
// desk and a toolgate worker whose OpenAI planner talks to a fake model.
type Env struct {
	Server    *devserver.Server
	Client    client.Client
	Desk      *desk.Desk
	Worker    sdkworker.Worker
	TaskQueue string
}

// PlannerOptions are the OpenAI planner's options for a fake model.
func PlannerOptions(f *Fake) openaiplanner.Options {
	return openaiplanner.Options{BaseURL: f.URL(), APIKey: APIKey, Model: ModelName, Timeout: 30 * time.Second}
}

// StartEnv starts everything under dir: the server's files in dir/temporal,
// the desk's in dir/desk.db. The worker has the desk's tools and one planner,
// "openai", built from planner. Close the Env when done.
func StartEnv(ctx context.Context, dir string, planner openaiplanner.Options) (_ *Env, err error) {
	e := &Env{TaskQueue: workflows.TaskQueue}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Server, err = devserver.Start(ctx, devserver.Options{DataDir: filepath.Join(dir, "temporal")}); err != nil {
		return nil, err
	}
	e.Client, err = client.Dial(client.Options{
		HostPort:  e.Server.Address(),
		Namespace: e.Server.Namespace(),
		Identity:  Identity,
		Logger:    Logger(),
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", e.Server.Address(), err)
	}
	if e.Desk, err = desk.Open(filepath.Join(dir, demo.DeskFile)); err != nil {
		return nil, err
	}
	opts := worker.Options{
		Tools: e.Desk.Tools(),
		Planners: map[string]worker.PlanFunc{
			plan.KindOpenAI: openaiplanner.New(planner).Plan,
		},
	}
	if e.Worker, err = worker.Start(e.Client, e.TaskQueue, opts); err != nil {
		return nil, err
	}
	return e, nil
}

// Logger is the SDK logger the suite uses: errors only, to stderr.
func Logger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// Close stops the worker, the client, the desk and the server.
func (e *Env) Close() {
	if e.Worker != nil {
		e.Worker.Stop()
	}
	if e.Client != nil {
		e.Client.Close()
	}
	if e.Desk != nil {
		_ = e.Desk.Close()
	}
	if e.Server != nil {
		_ = e.Server.Stop()
	}
}

// Start starts an AgentRun.
func (e *Env) Start(ctx context.Context, id string, in workflows.RunInput) (client.WorkflowRun, error) {
	return e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.TaskQueue}, workflows.WorkflowName, in)
}

// Run starts an AgentRun and waits for its result.
func (e *Env) Run(ctx context.Context, id string, in workflows.RunInput) (workflows.RunResult, error) {
	var res workflows.RunResult
	run, err := e.Start(ctx, id, in)
	if err != nil {
		return res, err
	}
	err = run.Get(ctx, &res)
	return res, err
}

// State queries a run's state.
func (e *Env) State(ctx context.Context, id string) (workflows.State, error) {
	var s workflows.State
	v, err := e.Client.QueryWorkflow(ctx, id, "", workflows.QueryState)
	if err != nil {
		return s, err
	}
	return s, v.Get(&s)
}

// WaitState polls the run's state until until(state) holds, or ctx ends.
func (e *Env) WaitState(ctx context.Context, id string, until func(workflows.State) bool) (workflows.State, error) {
	var last workflows.State
	var lastErr error
	for {
		s, err := e.State(ctx, id)
		if err == nil && until(s) {
			return s, nil
		}
		if err == nil {
			last = s
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for run %s (last state %+v, last error %v): %w", id, last, lastErr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// History fetches a run's whole history.
func (e *Env) History(ctx context.Context, id string) (*historypb.History, error) {
	it := e.Client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("reading the history of %s: %w", id, err)
		}
		h.Events = append(h.Events, ev)
	}
	if len(h.Events) == 0 {
		return nil, errors.New("empty history")
	}
	return h, nil
}

// MarshalHistory writes h in the JSON form of `temporal workflow show
// --output json`: protojson of history.v1.History, payloads in their full
// (metadata + base64 data) form, which the SDK's ReplayWorkflowHistoryFromJSONFile
// and client.HistoryFromJSON read.
func MarshalHistory(h *historypb.History) ([]byte, error) {
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// HistoryContains reports whether s occurs anywhere in h: in any string or
// payload of any event (the binary encoding holds both verbatim), or in its
// JSON export, with payloads in full (base64) or shorthand (decoded JSON) form.
func HistoryContains(h *historypb.History, s string) (bool, error) {
	bin, err := proto.Marshal(h)
	if err != nil {
		return false, err
	}
	full, err := MarshalHistory(h)
	if err != nil {
		return false, err
	}
	short, err := temporalproto.CustomJSONMarshalOptions{
		Metadata: map[string]any{commonpb.EnablePayloadShorthandMetadataKey: true},
	}.Marshal(h)
	if err != nil {
		return false, err
	}
	for _, b := range [][]byte{bin, full, short} {
		if bytes.Contains(b, []byte(s)) {
			return true, nil
		}
	}
	return false, nil
}
