package devserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/dynamicconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/toolgate/toolgate/devtls"
	"github.com/toolgate/toolgate/internal/principal"
)

// PersonAPIs are the full names of the APIs the person role may call (see
// AuthOptions); every other API is the worker role's alone. Health checks
// (grpc.health.v1.Health/Check, GetSystemInfo) are open to every caller.
var PersonAPIs = personAPIs()

func personAPIs() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{
		// What an SDK client asks of the cluster and the namespace.
		"GetClusterInfo", "GetSystemInfo", "DescribeNamespace", "ListNamespaces", "GetSearchAttributes",
		// Runs: start, signal, update (update-with-start is an
		// ExecuteMultiOperation of a start and an update), query.
		"StartWorkflowExecution", "SignalWorkflowExecution", "SignalWithStartWorkflowExecution",
		"UpdateWorkflowExecution", "ExecuteMultiOperation", "PollWorkflowExecutionUpdate", "QueryWorkflow",
		// Reading runs.
		"DescribeWorkflowExecution", "GetWorkflowExecutionHistory", "GetWorkflowExecutionHistoryReverse",
		"ListWorkflowExecutions", "ListOpenWorkflowExecutions", "ListClosedWorkflowExecutions",
		"ListArchivedWorkflowExecutions", "ScanWorkflowExecutions", "CountWorkflowExecutions",
		// Ending and rewinding runs (a person's for now).
		"RequestCancelWorkflowExecution", "TerminateWorkflowExecution", "ResetWorkflowExecution", "DeleteWorkflowExecution",
		// Reads the Web UI makes: who polls a queue, schedules and batches.
		"DescribeTaskQueue", "DescribeSchedule", "ListSchedules", "CountSchedules", "ListScheduleMatchingTimes",
		"DescribeBatchOperation", "ListBatchOperations",
	} {
		m[api.WorkflowServicePrefix+name] = true
	}
	m[api.OperatorServicePrefix+"ListSearchAttributes"] = true
	return m
}

// tokenClaimMapper maps a call's credential to a grant (see AuthOptions): a
// bearer token, else a client certificate's subject, else none (the person
// role, principal.Anonymous). It never fails, so that the authorizer can say
// why a credential is refused (the server's interceptor answers a claim
// mapper's error with a bare "Request unauthorized.").
type tokenClaimMapper struct{ a *authority }

var (
	_ authorization.ClaimMapper                     = (*tokenClaimMapper)(nil)
	_ authorization.ClaimMapperWithAuthInfoRequired = (*tokenClaimMapper)(nil)
)

// AuthInfoRequired is false: a call with no credential is mapped too (to
// the person role).
func (*tokenClaimMapper) AuthInfoRequired() bool { return false }

// GetClaims maps info to claims whose Extensions is the *grant.
func (m *tokenClaimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	var g grant
	switch {
	case info != nil && info.AuthToken != "":
		g = m.a.verifyHeader(info.AuthToken)
	case info != nil && info.TLSSubject != nil:
		g = m.a.certificate(info.TLSSubject.CommonName)
	default:
		g = grant{role: RolePerson, subject: principal.Anonymous}
	}
	return &authorization.Claims{Subject: g.subject, AuthType: g.role, Extensions: &g}, nil
}

// roleAuthorizer allows a call by its claims' role (see AuthOptions).
type roleAuthorizer struct {
	authority string // the authority namespace: a person may only read it
}

var _ authorization.Authorizer = roleAuthorizer{}

// PersonReadAPIs are the APIs the person role may call in the authority
// namespace: reading it, never writing.
var PersonReadAPIs = personReadAPIs()

func personReadAPIs() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{
		"GetClusterInfo", "GetSystemInfo", "DescribeNamespace", "ListNamespaces", "GetSearchAttributes",
		"QueryWorkflow", "DescribeWorkflowExecution", "GetWorkflowExecutionHistory", "GetWorkflowExecutionHistoryReverse",
		"ListWorkflowExecutions", "ListOpenWorkflowExecutions", "ListClosedWorkflowExecutions",
		"ListArchivedWorkflowExecutions", "ScanWorkflowExecutions", "CountWorkflowExecutions",
		"DescribeTaskQueue", "DescribeSchedule", "ListSchedules", "CountSchedules",
		"DescribeBatchOperation", "ListBatchOperations",
	} {
		m[api.WorkflowServicePrefix+name] = true
	}
	m[api.OperatorServicePrefix+"ListSearchAttributes"] = true
	return m
}

// Authorize allows the worker role everything, the person role PersonAPIs
// (minus versioning), and the server's own parts (internal claims, from the
// internal frontend) everything; it refuses a bad credential with
// Unauthenticated and a person's call of a worker's API with
// PermissionDenied, each saying why (frontend.exposeAuthorizerErrors).
func (a roleAuthorizer) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	var g *grant
	if claims != nil {
		g, _ = claims.Extensions.(*grant)
	}
	if g == nil {
		if claims != nil && claims.AuthType == authorization.InternalPrincipalType {
			// The internal frontend's claims: the server's own parts.
			return authorization.Result{Decision: authorization.DecisionAllow,
				Principal: &commonpb.Principal{Type: principal.Temporal, Name: claims.Subject}}, nil
		}
		g = &grant{role: RolePerson, subject: principal.Anonymous}
	}
	if g.err != nil {
		// Health checks too: a client with a bad token learns it when it
		// dials (the SDK's dial calls GetSystemInfo), not at its first poll.
		return authorization.Result{}, status.Error(codes.Unauthenticated, "toolgate dev: "+g.err.Error())
	}
	allow := authorization.Result{Decision: authorization.DecisionAllow, Principal: &commonpb.Principal{Type: g.role, Name: g.subject}}
	if g.role == RoleWorker || authorization.IsHealthCheckAPI(target.APIName) {
		return allow, nil
	}
	method := api.MethodName(target.APIName)
	if target.Namespace != "" && target.Namespace == a.authority && !PersonReadAPIs[target.APIName] {
		return authorization.Result{}, serviceerror.NewPermissionDenied(fmt.Sprintf(
			"toolgate dev: %s in %s refused: the authority namespace is written by workers only (uses claimed, the fleet ledger); "+
				"this call came with the person role (%q), which may read it; an operator's pause goes through a worker (toolgate guards pause)",
			method, target.Namespace, g.subject), "role")
	}
	if !PersonAPIs[target.APIName] {
		return authorization.Result{}, serviceerror.NewPermissionDenied(fmt.Sprintf(
			"toolgate dev: %s is a worker's API, and this call came with the person role (%q): a worker authenticates with the dev server's worker token "+
				"(auth/%s in its data directory: --token-file or $TOOLGATE_TOKEN_FILE)", method, g.subject, WorkerTokenFile), "role")
	}
	if why := versioningChange(target.Request); why != "" {
		return authorization.Result{}, serviceerror.NewPermissionDenied(fmt.Sprintf(
			"toolgate dev: %s %s, which is a worker's to do; this call came with the person role (%q)", method, why, g.subject), "role")
	}
	return allow, nil
}

// versioningChange says how a request a person may send changes a run's
// versioning or hands its first task to the caller ("" when it does not).
func versioningChange(req any) string {
	switch r := req.(type) {
	case *workflowservice.StartWorkflowExecutionRequest:
		return startChange(r)
	case *workflowservice.SignalWithStartWorkflowExecutionRequest:
		if r.GetVersioningOverride() != nil {
			return "with a versioning override pins the run"
		}
	case *workflowservice.ExecuteMultiOperationRequest:
		for _, op := range r.GetOperations() {
			if s := op.GetStartWorkflow(); s != nil {
				if why := startChange(s); why != "" {
					return why
				}
			}
		}
	case *workflowservice.ResetWorkflowExecutionRequest:
		for _, op := range r.GetPostResetOperations() {
			if op.GetUpdateWorkflowOptions() != nil {
				return "with a post-reset UpdateWorkflowOptions changes the run's options"
			}
		}
	}
	return ""
}

func startChange(r *workflowservice.StartWorkflowExecutionRequest) string {
	switch {
	case r.GetVersioningOverride() != nil:
		return "with a versioning override pins the run"
	case r.GetRequestEagerExecution():
		return "with eager execution hands the run's first workflow task to the caller"
	}
	return ""
}

// authDynamicConfig are the dynamic config settings of a server with
// authorization: principal attribution on, and the authorizer's errors
// shown to the caller (they say why a call was refused).
func authDynamicConfig() map[dynamicconfig.Key]any {
	return map[dynamicconfig.Key]any{
		dynamicconfig.EnablePrincipalPropagation.Key(): true,
		dynamicconfig.ExposeAuthorizerErrors.Key():     true,
	}
}

// internalNoHTTPAPI refuses the HTTP/JSON API's calls on the internal
// frontend (whose callers are the server itself: its claims are the
// internal ones), which serves an HTTP port for the server's Nexus
// requests alone.
func internalNoHTTPAPI(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, ok := runtime.HTTPPathPattern(ctx); ok {
		if c, _ := ctx.Value(authorization.MappedClaims).(*authorization.Claims); c != nil && c.AuthType == authorization.InternalPrincipalType {
			return nil, status.Errorf(codes.PermissionDenied, "the internal frontend's HTTP port serves the server's Nexus requests only")
		}
	}
	return h(ctx, req)
}

// localClientTLS is what this process's own clients of the public frontend
// (the UI, dev's worker) need under TLS: the server's certificate to trust
// (pinned: the file's certificates are their roots) and, with client
// certificates, one of their own.
type localClientTLS struct {
	ServerCAFile string // the server's certificate file (PEM), as the roots to check it against
	CertFile     string // the client certificate (LocalClientName), or "" without a client CA
	KeyFile      string
	CAFile       string // the CA that signed CertFile, added to the frontend's client CAs
}

// makeLocalClientTLS makes, in dir/local-tls (replaced), a CA and a client
// certificate it signs for LocalClientName, and removes the CA's key (and
// the server certificate devtls makes along): nobody can sign another.
func makeLocalClientTLS(dir string, t *TLSOptions) (localClientTLS, error) {
	out := localClientTLS{ServerCAFile: t.CertFile}
	if t.ClientCAFile == "" {
		return out, nil
	}
	d := filepath.Join(dir, localTLSDir)
	if err := os.RemoveAll(d); err != nil {
		return out, fmt.Errorf("devserver: local client certificate: %w", err)
	}
	f, err := devtls.Generate(d, devtls.Options{ClientName: LocalClientName, Validity: 400 * 24 * time.Hour})
	if err != nil {
		return out, fmt.Errorf("devserver: local client certificate: %w", err)
	}
	for _, p := range []string{f.CAKey, f.ServerCert, f.ServerKey} {
		if err := os.Remove(p); err != nil {
			return out, fmt.Errorf("devserver: local client certificate: %w", err)
		}
	}
	out.CertFile, out.KeyFile, out.CAFile = f.ClientCert, f.ClientKey, f.CA
	return out, nil
}
