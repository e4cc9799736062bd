package devserver

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/toolgate/toolgate/internal/principal"
)

// The principal types the audit reads (package principal, no server
// import) are the server's.
func TestPrincipalTypesAreTheServers(t *testing.T) {
	assert.Equal(t, authorization.InternalPrincipalType, principal.Temporal)
	assert.Equal(t, principal.Worker, RoleWorker)
	assert.Equal(t, principal.Person, RolePerson)
}

// Every API a person may call is one the server knows (a typo would close
// it, not open another); none of them polls or answers tasks.
func TestPersonAPIsAreServerAPIs(t *testing.T) {
	for name := range PersonAPIs {
		md := api.GetMethodMetadata(name)
		assert.NotEqual(t, api.ScopeUnknown, md.Scope, "%s is no API of the server", name)
		m := api.MethodName(name)
		for _, no := range []string{"Poll", "Respond", "Heartbeat", "Sticky", "Activity", "Versioning", "Deployment", "Nexus", "Batch"} {
			if strings.Contains(m, no) && m != "PollWorkflowExecutionUpdate" && m != "DescribeBatchOperation" && m != "ListBatchOperations" {
				t.Errorf("%s is a person's API", m)
			}
		}
	}
}

// openTestAuthority is an authority on a temp dir whose clock the test sets.
func openTestAuthority(t *testing.T, dir string) (*authority, *time.Time) {
	t.Helper()
	a, err := openAuthority(dir, &AuthOptions{WorkerSubjects: []string{"robot"}})
	require.NoError(t, err)
	now := time.Now()
	a.now = func() time.Time { return now }
	return a, &now
}

// Tokens: a minted token verifies to its role and subject; the key is kept
// (0600) and used again; an expired, early, foreign, malformed or unbearered
// token is refused saying which; certificates map to roles by common name.
func TestTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	a, now := openTestAuthority(t, dir)
	tok, err := a.mint(RoleWorker, "w1", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, grant{role: RoleWorker, subject: "w1"}, a.verifyHeader("Bearer "+tok))
	assert.Equal(t, grant{role: RoleWorker, subject: "w1"}, a.verifyHeader("bearer  "+tok+" "))

	// The key is kept: a second authority on the dir takes the token.
	b, _ := openTestAuthority(t, dir)
	assert.Equal(t, grant{role: RoleWorker, subject: "w1"}, b.verifyHeader("Bearer "+tok))
	require.NoError(t, a.writeWorkerToken())
	for _, name := range []string{SigningKeyFile, WorkerTokenFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	wt, err := os.ReadFile(filepath.Join(dir, WorkerTokenFile))
	require.NoError(t, err)
	assert.Equal(t, grant{role: RoleWorker, subject: WorkerTokenSubject}, a.verify(strings.TrimSpace(string(wt))))

	refusedAs := func(g grant, says string) {
		t.Helper()
		require.Error(t, g.err)
		assert.Contains(t, g.err.Error(), says)
		assert.Empty(t, g.role)
	}
	*now = now.Add(2 * time.Hour)
	refusedAs(a.verifyHeader("Bearer "+tok), "expired at")
	*now = now.Add(-3 * time.Hour)
	refusedAs(a.verifyHeader("Bearer "+tok), "not valid yet")
	*now = time.Now()

	other, _ := openTestAuthority(t, t.TempDir())
	foreign, err := other.mint(RoleWorker, "mallory", time.Hour)
	require.NoError(t, err)
	refusedAs(a.verifyHeader("Bearer "+foreign), "not signed by this dev server's key")
	refusedAs(a.verifyHeader("Bearer not-a-token"), "not a token of a toolgate dev server")
	refusedAs(a.verifyHeader(tok), `not "Bearer TOKEN"`)
	refusedAs(a.verifyHeader("Basic "+tok), `not "Bearer TOKEN"`)
	// A token is never echoed in an error.
	for _, h := range []string{"Bearer " + tok, "Bearer " + foreign, "Basic " + tok} {
		*now = now.Add(2 * time.Hour)
		if g := a.verifyHeader(h); g.err != nil {
			assert.NotContains(t, g.err.Error(), tok)
			assert.NotContains(t, g.err.Error(), foreign)
		}
		*now = time.Now()
	}

	_, err = a.mint("admin", "x", time.Hour)
	assert.ErrorContains(t, err, `role "admin"`)
	_, err = a.mint(RolePerson, "", time.Hour)
	assert.ErrorContains(t, err, "subject")
	_, err = a.mint(RolePerson, "x", 0)
	assert.ErrorContains(t, err, "not positive")

	assert.Equal(t, grant{role: RoleWorker, subject: "robot"}, a.certificate("robot"))
	assert.Equal(t, grant{role: RolePerson, subject: "alice"}, a.certificate("alice"))
	a.workerSubjects = append(a.workerSubjects, LocalClientName)
	assert.Equal(t, grant{role: RolePerson, subject: LocalClientName}, a.certificate(LocalClientName), "the server's own certificate is never a worker's")

	require.NoError(t, os.WriteFile(filepath.Join(dir, SigningKeyFile), []byte("{}"), 0o600))
	_, err = openAuthority(dir, &AuthOptions{})
	assert.ErrorContains(t, err, "remove it to make a new one")
}

// The authorizer by role: a worker everything; a person PersonAPIs, never
// with a versioning change; the server's own parts everything, as
// "temporal"; a bad token nothing, not even a health check.
func TestAuthorizerRoles(t *testing.T) {
	a, _ := openTestAuthority(t, t.TempDir())
	cm := &tokenClaimMapper{a: a}
	claims := func(info *authorization.AuthInfo) *authorization.Claims {
		c, err := cm.GetClaims(info)
		require.NoError(t, err)
		return c
	}
	workerTok, err := a.mint(RoleWorker, "w", time.Hour)
	require.NoError(t, err)
	personTok, err := a.mint(RolePerson, "alice", time.Hour)
	require.NoError(t, err)
	var (
		worker    = claims(&authorization.AuthInfo{AuthToken: "Bearer " + workerTok})
		person    = claims(&authorization.AuthInfo{AuthToken: "Bearer " + personTok})
		anonymous = claims(&authorization.AuthInfo{})
		bad       = claims(&authorization.AuthInfo{AuthToken: "Bearer nope"})
		internal  = &authorization.Claims{System: authorization.RoleAdmin, AuthType: authorization.InternalPrincipalType, Subject: authorization.InternalPrincipalName}
	)
	authorize := func(c *authorization.Claims, method string, req any) (*commonpb.Principal, error) {
		r, err := roleAuthorizer{}.Authorize(context.Background(), c, &authorization.CallTarget{APIName: method, Namespace: "default", Request: req})
		if err == nil {
			require.Equal(t, authorization.DecisionAllow, r.Decision)
		}
		return r.Principal, err
	}
	ws := func(m string) string { return api.WorkflowServicePrefix + m }
	workersOnly := []string{ws("PollWorkflowTaskQueue"), ws("PollActivityTaskQueue"), ws("PollNexusTaskQueue"), ws("RespondWorkflowTaskCompleted"),
		ws("RespondActivityTaskCompleted"), ws("RespondActivityTaskCompletedById"), ws("RespondActivityTaskFailedById"), ws("RecordActivityTaskHeartbeatById"),
		ws("RespondQueryTaskCompleted"), ws("ResetStickyTaskQueue"), ws("UpdateWorkflowExecutionOptions"), ws("UpdateActivityOptions"), ws("PauseActivity"),
		ws("ResetActivity"), ws("SetWorkerDeploymentCurrentVersion"), ws("UpdateWorkerVersioningRules"), ws("ShutdownWorker"), ws("StartBatchOperation"),
		ws("CreateSchedule"), ws("UpdateNamespace"), ws("RegisterNamespace"), ws("SomeFutureAPI"),
		api.OperatorServicePrefix + "AddSearchAttributes", api.OperatorServicePrefix + "CreateNexusEndpoint", api.OperatorServicePrefix + "ListNexusEndpoints",
		api.AdminServicePrefix + "DescribeMutableState", api.NexusServicePrefix + "DispatchByEndpoint"}
	people := []string{ws("StartWorkflowExecution"), ws("SignalWorkflowExecution"), ws("SignalWithStartWorkflowExecution"), ws("UpdateWorkflowExecution"),
		ws("ExecuteMultiOperation"), ws("QueryWorkflow"), ws("GetWorkflowExecutionHistory"), ws("DescribeWorkflowExecution"), ws("ListWorkflowExecutions"),
		ws("PollWorkflowExecutionUpdate"), ws("TerminateWorkflowExecution"), ws("ResetWorkflowExecution"), ws("DeleteWorkflowExecution"),
		ws("RequestCancelWorkflowExecution"), ws("DescribeNamespace"), api.OperatorServicePrefix + "ListSearchAttributes"}

	for _, m := range append(slicesConcat(workersOnly, people), "/grpc.health.v1.Health/Check") {
		p, err := authorize(worker, m, nil)
		require.NoError(t, err, m)
		assert.Equal(t, &commonpb.Principal{Type: principal.Worker, Name: "w"}, p, m)
		p, err = authorize(internal, m, nil)
		require.NoError(t, err, m)
		assert.Equal(t, &commonpb.Principal{Type: principal.Temporal, Name: authorization.InternalPrincipalName}, p, m)
		_, err = authorize(bad, m, nil)
		assert.Equal(t, codes.Unauthenticated, status.Code(err), m)
	}
	for c, name := range map[*authorization.Claims]string{person: "alice", anonymous: principal.Anonymous, nil: principal.Anonymous} {
		for _, m := range people {
			p, err := authorize(c, m, nil)
			require.NoError(t, err, m)
			assert.Equal(t, &commonpb.Principal{Type: principal.Person, Name: name}, p, m)
		}
		for _, m := range workersOnly {
			_, err := authorize(c, m, nil)
			var denied *serviceerror.PermissionDenied
			require.ErrorAs(t, err, &denied, m)
			assert.Contains(t, err.Error(), api.MethodName(m)+" is a worker's API", m)
			assert.Contains(t, err.Error(), name)
		}
		pin := &workflowpb.VersioningOverride{Override: &workflowpb.VersioningOverride_Pinned{Pinned: &workflowpb.VersioningOverride_PinnedOverride{
			Behavior: workflowpb.VersioningOverride_PINNED_OVERRIDE_BEHAVIOR_PINNED, Version: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "rogue", BuildId: "1"}}}}
		for m, req := range map[string]any{
			ws("StartWorkflowExecution"):           &workflowservice.StartWorkflowExecutionRequest{VersioningOverride: pin},
			ws("SignalWithStartWorkflowExecution"): &workflowservice.SignalWithStartWorkflowExecutionRequest{VersioningOverride: pin},
			ws("ExecuteMultiOperation"): &workflowservice.ExecuteMultiOperationRequest{Operations: []*workflowservice.ExecuteMultiOperationRequest_Operation{
				{Operation: &workflowservice.ExecuteMultiOperationRequest_Operation_StartWorkflow{StartWorkflow: &workflowservice.StartWorkflowExecutionRequest{RequestEagerExecution: true}}}}},
			ws("ResetWorkflowExecution"): &workflowservice.ResetWorkflowExecutionRequest{PostResetOperations: []*workflowpb.PostResetOperation{
				{Variant: &workflowpb.PostResetOperation_UpdateWorkflowOptions_{UpdateWorkflowOptions: &workflowpb.PostResetOperation_UpdateWorkflowOptions{}}}}},
		} {
			_, err := authorize(c, m, req)
			var denied *serviceerror.PermissionDenied
			require.ErrorAs(t, err, &denied, m)
			_, err = authorize(worker, m, req)
			require.NoError(t, err, m)
		}
	}
}

// In the authority namespace a person may only read: every write (start,
// signal, update, terminate, reset, delete) is refused, saying why; a
// worker may do anything there.
func TestAuthorityNamespaceIsWrittenByWorkersOnly(t *testing.T) {
	a, _ := openTestAuthority(t, t.TempDir())
	cm := &tokenClaimMapper{a: a}
	workerTok, err := a.mint(RoleWorker, "w", time.Hour)
	require.NoError(t, err)
	worker, err := cm.GetClaims(&authorization.AuthInfo{AuthToken: "Bearer " + workerTok})
	require.NoError(t, err)
	person, err := cm.GetClaims(&authorization.AuthInfo{})
	require.NoError(t, err)
	az := roleAuthorizer{authority: "default-authority"}
	authorize := func(c *authorization.Claims, method, ns string) error {
		_, err := az.Authorize(context.Background(), c, &authorization.CallTarget{APIName: method, Namespace: ns})
		return err
	}
	ws := func(m string) string { return api.WorkflowServicePrefix + m }
	writes := []string{ws("StartWorkflowExecution"), ws("SignalWorkflowExecution"), ws("SignalWithStartWorkflowExecution"), ws("UpdateWorkflowExecution"),
		ws("ExecuteMultiOperation"), ws("TerminateWorkflowExecution"), ws("ResetWorkflowExecution"), ws("DeleteWorkflowExecution"),
		ws("RequestCancelWorkflowExecution")}
	reads := []string{ws("QueryWorkflow"), ws("GetWorkflowExecutionHistory"), ws("DescribeWorkflowExecution"), ws("ListWorkflowExecutions"), ws("DescribeNamespace")}
	for _, m := range writes {
		err := authorize(person, m, "default-authority")
		var denied *serviceerror.PermissionDenied
		require.ErrorAs(t, err, &denied, m)
		assert.Contains(t, err.Error(), "the authority namespace is written by workers only", m)
		require.NoError(t, authorize(person, m, "default"), "%s in the runs' namespace", m)
		require.NoError(t, authorize(worker, m, "default-authority"), m)
	}
	for _, m := range reads {
		require.NoError(t, authorize(person, m, "default-authority"), m)
	}
}

// codeOf is err's gRPC code: the SDK turns most into serviceerror types,
// which status.Code does not read.
func codeOf(err error) codes.Code {
	var denied *serviceerror.PermissionDenied
	if errors.As(err, &denied) {
		return codes.PermissionDenied
	}
	return status.Code(err)
}

func slicesConcat(a, b []string) []string { return append(append([]string{}, a...), b...) }

// bearer dials s's frontend with token ("" for none).
func bearer(t *testing.T, s *Server, token string) client.Client {
	t.Helper()
	o := client.Options{HostPort: s.Address(), Namespace: s.Namespace(), Logger: quietLogger(),
		ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}}
	if token != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(token)
	}
	c, err := client.Dial(o)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// principalOf is the principal of the first event of typ in history.
func principalOf(t *testing.T, events []*historypb.HistoryEvent, typ enumspb.EventType) *commonpb.Principal {
	t.Helper()
	for _, e := range events {
		if e.GetEventType() == typ {
			return e.GetPrincipal()
		}
	}
	t.Fatalf("no %s event in the history", typ)
	return nil
}

func history(t *testing.T, c client.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		events = append(events, e)
	}
	return events
}

// On a real server with Authorization: a person (token or none) may start,
// signal and read a run but not poll its task queue, reset its sticky
// queue or pin its version; a worker token's worker runs it; the history
// names who did what (person, worker, and the scheduler as temporal); a
// bad token is refused at dial; the UI has a person's role; the signing key
// survives a restart.
func TestAuthorizationOnARealServer(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Options{DataDir: dir, Authorization: &AuthOptions{}, UIAddress: "127.0.0.1:0"})
	require.True(t, s.Authorization())
	require.Equal(t, filepath.Join(dir, "auth", WorkerTokenFile), s.WorkerTokenFile())
	require.NotEqual(t, s.Address(), s.InternalAddress(), "the server's own parts have a frontend of their own")
	assertPrivateFiles(t, filepath.Join(dir, "auth"))
	workerToken, err := os.ReadFile(s.WorkerTokenFile())
	require.NoError(t, err)
	aliceToken, err := s.MintToken(RolePerson, "alice", time.Hour)
	require.NoError(t, err)

	workerClient := bearer(t, s, strings.TrimSpace(string(workerToken)))
	alice := bearer(t, s, aliceToken)
	anonymous := bearer(t, s, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Before any worker: persons cannot poll the queue (no worker of their own).
	for who, c := range map[string]client.Client{"alice": alice, "anonymous": anonymous} {
		ws := c.WorkflowService()
		_, err := ws.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: s.Namespace(),
			TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue}, Identity: "rogue"})
		assert.Equal(t, codes.PermissionDenied, codeOf(err), "%s polls workflow tasks: %v", who, err)
		assert.ErrorContains(t, err, "PollWorkflowTaskQueue is a worker's API")
		_, err = ws.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: s.Namespace(),
			TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue}, Identity: "rogue"})
		assert.Equal(t, codes.PermissionDenied, codeOf(err), "%s polls activity tasks: %v", who, err)
	}
	// A token of another server's key is refused at dial, saying why.
	foreign, err := MintToken(t.TempDir(), RoleWorker, "mallory", time.Hour)
	require.NoError(t, err)
	_, err = client.Dial(client.Options{HostPort: s.Address(), Namespace: s.Namespace(), Logger: quietLogger(),
		Credentials: client.NewAPIKeyStaticCredentials(foreign), ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}})
	require.Error(t, err)
	assert.Equal(t, codes.Unauthenticated, codeOf(err), "%v", err)
	assert.ErrorContains(t, err, "not signed by this dev server's key")

	w := startWorker(t, workerClient)
	defer w.Stop()
	run, err := anonymous.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "who", TaskQueue: taskQueue}, WaitForSignal, "hi ")
	require.NoError(t, err)
	_, err = alice.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{Namespace: s.Namespace(),
		Execution: &commonpb.WorkflowExecution{WorkflowId: "who", RunId: run.GetRunID()}})
	assert.Equal(t, codes.PermissionDenied, codeOf(err), "a person resets the sticky queue: %v", err)
	_, err = anonymous.WorkflowService().UpdateWorkflowExecutionOptions(ctx, &workflowservice.UpdateWorkflowExecutionOptionsRequest{Namespace: s.Namespace(),
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "who", RunId: run.GetRunID()},
		WorkflowExecutionOptions: &workflowpb.WorkflowExecutionOptions{VersioningOverride: &workflowpb.VersioningOverride{
			Override: &workflowpb.VersioningOverride_Pinned{Pinned: &workflowpb.VersioningOverride_PinnedOverride{
				Behavior: workflowpb.VersioningOverride_PINNED_OVERRIDE_BEHAVIOR_PINNED,
				Version:  &deploymentpb.WorkerDeploymentVersion{DeploymentName: "rogue", BuildId: "1"}}}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"versioning_override"}}})
	assert.Equal(t, codes.PermissionDenied, codeOf(err), "a person pins the run: %v", err)
	require.NoError(t, alice.SignalWorkflow(ctx, "who", "", "go", "there"))
	var got string
	require.NoError(t, run.Get(ctx, &got))
	assert.Equal(t, "hi there", got)

	events := history(t, anonymous, "who")
	assert.Equal(t, &commonpb.Principal{Type: principal.Person, Name: principal.Anonymous},
		principalOf(t, events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED))
	assert.Equal(t, &commonpb.Principal{Type: principal.Person, Name: "alice"},
		principalOf(t, events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))
	assert.Equal(t, &commonpb.Principal{Type: principal.Worker, Name: WorkerTokenSubject},
		principalOf(t, events, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED))
	for _, e := range events {
		t.Logf("%3d %-40s %v", e.GetEventId(), e.GetEventType(), e.GetPrincipal())
	}

	// The server's own parts work, through the internal frontend: a schedule
	// (the worker's to make) starts a run as "temporal".
	_, err = alice.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: "sched", Spec: client.ScheduleSpec{},
		Action: &client.ScheduleWorkflowAction{ID: "scheduled", Workflow: Hello, Args: []any{"x"}, TaskQueue: taskQueue}})
	var denied *serviceerror.PermissionDenied
	assert.ErrorAs(t, err, &denied, "a person makes a schedule")
	sched, err := workerClient.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: "sched", Spec: client.ScheduleSpec{}, TriggerImmediately: true,
		Action: &client.ScheduleWorkflowAction{ID: "scheduled", Workflow: Hello, Args: []any{"x"}, TaskQueue: taskQueue}})
	require.NoError(t, err)
	scheduled := ""
	require.Eventually(t, func() bool {
		d, err := sched.Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		scheduled = d.Info.RecentActions[0].StartWorkflowResult.WorkflowID
		e, err := anonymous.DescribeWorkflowExecution(ctx, scheduled, "")
		return err == nil && e.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, 30*time.Second, 100*time.Millisecond, "the scheduler starts the run")
	assert.Equal(t, principal.Temporal, principalOf(t, history(t, anonymous, scheduled), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED).GetType())

	// The UI reaches the server as a person: it lists runs, but an
	// operator API (Nexus endpoints) is refused.
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get("http://" + s.UIAddress() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/api/v1/namespaces/" + s.Namespace() + "/workflows?query=WorkflowId%3D%27who%27")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "who")
	code, body = get("/api/v1/nexus/endpoints")
	assert.NotEqual(t, http.StatusOK, code, "the UI lists Nexus endpoints, an operator's API: %s", body)
	t.Logf("UI, Nexus endpoints: %d %s", code, body)

	// The key survives a restart: alice's token still works, and the worker
	// token is renewed in place.
	w.Stop()
	stopServer(t, s)
	s = startServer(t, Options{DataDir: dir, Authorization: &AuthOptions{}})
	again := bearer(t, s, aliceToken)
	_, err = again.DescribeWorkflowExecution(ctx, "who", "")
	require.NoError(t, err)
	_, err = again.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: s.Namespace(),
		TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue}})
	assert.Equal(t, codes.PermissionDenied, codeOf(err))
	renewed, err := os.ReadFile(s.WorkerTokenFile())
	require.NoError(t, err)
	assert.NotEqual(t, string(workerToken), string(renewed))
	assert.NotNil(t, bearer(t, s, strings.TrimSpace(string(workerToken))), "the old worker token is good until it expires")
}

// Under mutual TLS with Authorization: a client certificate named in
// WorkerSubjects is a worker; the server's own client certificate (what
// dev's worker and the UI present, LocalWorker) is a person's by itself and
// a worker's with the worker token; the UI reaches the public frontend with
// it; the history says worker for the tasks.
func TestAuthorizationUnderMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := certs(t)
	dir := t.TempDir()
	s := startServer(t, Options{DataDir: dir, UIAddress: "127.0.0.1:0",
		TLS:           &TLSOptions{CertFile: f.ServerCert, KeyFile: f.ServerKey, ClientCAFile: f.CA},
		Authorization: &AuthOptions{WorkerSubjects: []string{"robot"}}})
	lw, ok := s.LocalWorker()
	require.True(t, ok)
	require.True(t, lw.TLS)
	require.Equal(t, s.Address(), lw.Address)
	assert.Equal(t, filepath.Join(dir, "auth", localTLSDir, "client.pem"), lw.CertFile)
	for _, gone := range []string{"ca.key", "server.pem", "server.key"} {
		_, err := os.Stat(filepath.Join(dir, "auth", localTLSDir, gone))
		assert.ErrorIs(t, err, os.ErrNotExist, "%s is left behind", gone)
	}
	token, err := os.ReadFile(lw.TokenFile)
	require.NoError(t, err)

	local := clientTLS(t, lw.ServerCAFile, lw.CertFile, lw.KeyFile)
	dial := func(tc *tls.Config, tok string) client.Client {
		t.Helper()
		o := client.Options{HostPort: s.Address(), Namespace: s.Namespace(), Logger: quietLogger(), ConnectionOptions: client.ConnectionOptions{TLS: tc}}
		if tok != "" {
			o.Credentials = client.NewAPIKeyStaticCredentials(tok)
		}
		c, err := client.DialContext(ctx, o)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	poll := func(c client.Client) error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.WorkflowService().PollActivityTaskQueue(pctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: s.Namespace(),
			TaskQueue: &taskqueuepb.TaskQueue{Name: "nobody-here"}})
		return err
	}
	person := dial(local, "")
	assert.Equal(t, codes.PermissionDenied, codeOf(poll(person)), "the server's own certificate alone is a person's")
	operatorCert := dial(clientTLS(t, f.CA, f.ClientCert, f.ClientKey), "")
	assert.Equal(t, codes.PermissionDenied, codeOf(poll(operatorCert)), "a certificate not in WorkerSubjects is a person's")
	workerClient := dial(local, strings.TrimSpace(string(token)))
	assert.NotEqual(t, codes.PermissionDenied, codeOf(poll(workerClient)), "the worker token is a worker's")

	w := startWorker(t, workerClient)
	defer w.Stop()
	run, err := person.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hello-mtls-auth", TaskQueue: taskQueue}, Hello, "mtls")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	events := history(t, person, "hello-mtls-auth")
	assert.Equal(t, &commonpb.Principal{Type: principal.Person, Name: LocalClientName}, principalOf(t, events, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED))
	assert.Equal(t, &commonpb.Principal{Type: principal.Worker, Name: WorkerTokenSubject}, principalOf(t, events, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED))

	resp, err := http.Get("http://" + s.UIAddress() + "/api/v1/namespaces/" + s.Namespace() + "/workflows")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Contains(t, string(body), "hello-mtls-auth")
}
