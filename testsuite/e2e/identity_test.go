package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// identityQueue is the task queue of the slow tool another worker hosts in
// the identity test: its activity stays in flight until the test lets it go.
const identityQueue = "e2e-identity-remote"

// newAuthStack starts an embedded server with authorization (what `toolgate
// dev` runs) and dials it with its worker token through package connect
// (--token-file), as the stack's client: the worker the test starts is a
// worker. The stack's toolgate client is a person's with no credential.
func newAuthStack(t *testing.T) (*stack, client.Client) {
	t.Helper()
	s := &stack{t: t, dataDir: t.TempDir(), sdkLog: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() && s.sdkLog.Len() > 0 {
			t.Logf("SDK log:\n%s", s.sdkLog.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{DataDir: s.dataDir, SearchAttributes: testenv.SearchAttributes, Authorization: &devserver.AuthOptions{}})
	if err != nil {
		t.Fatalf("starting the embedded server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
	})
	s.server = srv
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(s.sdkLog, &slog.HandlerOptions{Level: slog.LevelWarn})))
	wc, conn, err := connect.Dial(ctx, connect.Settings{Address: srv.Address(), Namespace: srv.Namespace(), TokenFile: srv.WorkerTokenFile(), Isolated: true},
		func(o *client.Options) { o.Logger = logger })
	if err != nil {
		t.Fatalf("dialing with the worker token: %v", err)
	}
	t.Cleanup(wc.Close)
	if d := conn.Describe(); !strings.Contains(d, "token from "+srv.WorkerTokenFile()) || !strings.Contains(d, "plaintext") {
		t.Fatalf("the worker's connection: %s", d)
	}
	s.client = wc
	anonymous := personClient(t, srv, "")
	s.tg = tgclient.New(anonymous)
	return s, anonymous
}

// personClient dials srv with a person's token ("" for no credential).
func personClient(t *testing.T, srv *devserver.Server, token string) client.Client {
	t.Helper()
	o := client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}}
	if token != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, o)
	if err != nil {
		t.Fatalf("dialing as a person: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// slowHost hosts slow_lookup on identityQueue: each attempt waits until
// release is closed.
type slowHost struct {
	started chan struct{} // closed by the first attempt
	once    sync.Once
	release chan struct{}
}

func (h *slowHost) lookup(ctx context.Context, req tool.Request) (json.RawMessage, error) {
	h.once.Do(func() { close(h.started) })
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.RawMessage(`{"found":"the real answer"}`), nil
}

// denied fails the test unless err is the server's PermissionDenied.
func denied(t *testing.T, what string, err error) {
	t.Helper()
	var pd *serviceerror.PermissionDenied
	if !errors.As(err, &pd) && status.Code(err) != codes.PermissionDenied {
		t.Fatalf("%s: %v, want PermissionDenied from the server", what, err)
	}
	if !strings.Contains(err.Error(), "is a worker's API") {
		t.Fatalf("%s: refused with %q, want the role named", what, err)
	}
}

// Identity from the server (issue 43): on the server `toolgate dev` runs, a
// person — with a person's token or with no credential at all — can neither
// poll the workers' task queues (no worker of one's own), complete a run's
// in-flight activity by id, reset its sticky queue nor pin its version; yet
// starts, signals, updates, queries and reads the run; the worker token's
// worker runs it to its end; and the history says who did what: every
// workflow task and activity completion a worker's, the start and the
// signal a person's.
func TestIdentityFromTheServer(t *testing.T) {
	s, anonymous := newAuthStack(t)
	aliceToken, err := s.server.MintToken(devserver.RolePerson, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := personClient(t, s.server, aliceToken)
	persons := map[string]client.Client{"alice (person token)": alice, "anonymous (no credential)": anonymous}
	ns := s.server.Namespace()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()

	for who, c := range persons {
		for _, q := range []string{workflows.TaskQueue, identityQueue} {
			_, err := c.WorkflowService().PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns,
				TaskQueue: &taskqueuepb.TaskQueue{Name: q, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, Identity: "rogue"})
			denied(t, who+" polls "+q+" for workflow tasks", err)
			_, err = c.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: ns,
				TaskQueue: &taskqueuepb.TaskQueue{Name: q, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, Identity: "rogue"})
			denied(t, who+" polls "+q+" for activity tasks", err)
		}
	}

	s.startWorkerWith(func(o *worker.Options) {
		o.Tools = append(o.Tools, tool.Tool{Spec: tool.Spec{Name: "slow_lookup", TaskQueue: identityQueue, Timeout: time.Minute,
			Retry: tool.RetryPolicy{MaxAttempts: 1}}})
	})
	h := &slowHost{started: make(chan struct{}), release: make(chan struct{})}
	host := sdkworker.New(s.client, identityQueue, sdkworker.Options{})
	host.RegisterActivityWithOptions(h.lookup, activity.RegisterOptions{Name: "slow_lookup"})
	if err := host.Start(); err != nil {
		t.Fatalf("starting the slow tool's worker: %v", err)
	}
	defer host.Stop()

	id := "identity-1"
	run := s.start(id, workflows.RunInput{Goal: "look it up, close two tickets", Planner: scripted("done",
		step(call("slow_lookup", `{"q":"login"}`)),
		step(call("close_ticket", `{"ticket_id":"TKT-3"}`)),
		step(call("close_ticket", `{"ticket_id":"TKT-4"}`)))})
	select {
	case <-h.started:
	case <-ctx.Done():
		t.Fatal("slow_lookup never started")
	}
	desc, err := anonymous.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatalf("a person describes the run: %v", err)
	}
	var activityID string
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() == "slow_lookup" {
			activityID = pa.GetActivityId()
		}
	}
	if activityID == "" {
		t.Fatalf("slow_lookup is not in flight: %v", desc.GetPendingActivities())
	}
	forged, err := converter.GetDefaultDataConverter().ToPayloads(json.RawMessage(`{"found":"forged","paid":true,"to":"mallory"}`))
	if err != nil {
		t.Fatal(err)
	}
	exec := &commonpb.WorkflowExecution{WorkflowId: id, RunId: run.GetRunID()}
	pin := &workflowpb.VersioningOverride{Override: &workflowpb.VersioningOverride_Pinned{Pinned: &workflowpb.VersioningOverride_PinnedOverride{
		Behavior: workflowpb.VersioningOverride_PINNED_OVERRIDE_BEHAVIOR_PINNED,
		Version:  &deploymentpb.WorkerDeploymentVersion{DeploymentName: "rogue", BuildId: "1"}}}}
	for who, c := range persons {
		ws := c.WorkflowService()
		_, err := ws.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: ns,
			WorkflowId: id, RunId: run.GetRunID(), ActivityId: activityID, Result: forged, Identity: "rogue"})
		denied(t, who+" completes the in-flight slow_lookup by id", err)
		_, err = ws.ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{Namespace: ns, Execution: exec})
		denied(t, who+" resets the run's sticky queue", err)
		_, err = ws.UpdateWorkflowExecutionOptions(ctx, &workflowservice.UpdateWorkflowExecutionOptionsRequest{Namespace: ns, WorkflowExecution: exec,
			WorkflowExecutionOptions: &workflowpb.WorkflowExecutionOptions{VersioningOverride: pin},
			UpdateMask:               &fieldmaskpb.FieldMask{Paths: []string{"versioning_override"}}})
		denied(t, who+" pins the run's version", err)
		// Reading the run is a person's.
		if _, err := tgclient.New(c).State(ctx, id); err != nil {
			t.Fatalf("%s queries the run: %v", who, err)
		}
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if _, err := it.Next(); err != nil {
			t.Fatalf("%s reads the run's history: %v", who, err)
		}
	}
	close(h.release)

	// c-2 approved by a signal of alice's, c-3 by an update with no credential.
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	st := s.mustState(id)
	if len(st.Interrupts) != 1 || st.Interrupts[0].CallID != "c-2" {
		t.Fatalf("interrupts %+v, want c-2's", st.Interrupts)
	}
	if err := alice.SignalWorkflow(ctx, id, "", workflows.SignalApprove,
		workflows.DecisionInput{CallID: "c-2", Approver: "alice", ArgsDigest: st.Interrupts[0].ArgsDigest}); err != nil {
		t.Fatalf("alice signals her approval: %v", err)
	}
	s.decideWaiting(id, "gate:close_ticket", "c-3", true)
	res := s.result(id, waitTimeout)
	checkEvents(t, "the run", res.Trace,
		event{"c-1", "slow_lookup", "ok"},
		event{"c-2", "close_ticket", "blocked"}, event{"c-2", "close_ticket", "approved"}, event{"c-2", "close_ticket", "ok"},
		event{"c-3", "close_ticket", "blocked"}, event{"c-3", "close_ticket", "approved"}, event{"c-3", "close_ticket", "ok"})
	if got := string(res.Trace[0].Result); !strings.Contains(got, "the real answer") {
		t.Fatalf("slow_lookup's result is %s, want its worker's", got)
	}
	d := s.openDesk()
	for _, tk := range []string{"TKT-3", "TKT-4"} {
		got, err := d.Ticket(ctx, tk)
		if err != nil || got.Status != "closed" {
			t.Fatalf("%s: %+v, %v; want closed", tk, got, err)
		}
	}

	// Who did what, in the server's words.
	var events []*historypb.HistoryEvent
	it := anonymous.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	worker := &commonpb.Principal{Type: principal.Worker, Name: devserver.WorkerTokenSubject}
	count := map[enumspb.EventType]int{}
	for _, e := range events {
		want := (*commonpb.Principal)(nil)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			want = worker
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			want = &commonpb.Principal{Type: principal.Person, Name: principal.Anonymous}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			want = &commonpb.Principal{Type: principal.Person, Name: "alice"}
		default:
			continue
		}
		count[e.GetEventType()]++
		if got := e.GetPrincipal(); got.GetType() != want.GetType() || got.GetName() != want.GetName() {
			t.Errorf("event %d %s: principal %v, want %v", e.GetEventId(), e.GetEventType(), got, want)
		}
	}
	for _, typ := range []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED} {
		if count[typ] == 0 {
			t.Errorf("no %s event in the history", typ)
		}
	}
	if t.Failed() {
		for _, e := range events {
			t.Logf("%3d %-45s %v", e.GetEventId(), e.GetEventType(), e.GetPrincipal())
		}
	}
	t.Logf("principals checked on %v", fmt.Sprint(count))
}
