package devserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// With Nexus (and not HTTPAPI) the server serves its HTTP port, which the
// history service sends Nexus operations to, but refuses every call of the
// HTTP/JSON API on it: a web page's text/plain POST starts no workflow.
func TestNexusServesNoHTTPAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startServer(t, Options{DataDir: t.TempDir(), Nexus: true})
	defer stopServer(t, s)
	require.NotEmpty(t, s.HTTPAddress(), "the HTTP port is served for Nexus")
	status, body, err := postStart(s.HTTPAddress(), s.Namespace(), "probe-nexus", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status, body)
	require.True(t, strings.Contains(body, "serves Nexus requests only"), body)
	c := newClient(t, s)
	defer c.Close()
	_, err = c.DescribeWorkflowExecution(ctx, "probe-nexus", "")
	require.Error(t, err, "no workflow was started over HTTP")
	callEcho(ctx, t, c, "nexus-plain")
}

// Nexus under TLS is refused at start, saying why (ErrNexusUnderTLS).
func TestNexusUnderTLSRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := certs(t)
	_, err := Start(ctx, Options{DataDir: t.TempDir(), Nexus: true, TLS: &TLSOptions{CertFile: f.ServerCert, KeyFile: f.ServerKey}})
	require.EqualError(t, err, ErrNexusUnderTLS)
}

// echoCaller calls the echo service's operation through the endpoint.
func echoCaller(ctx workflow.Context, in string) (string, error) {
	var out string
	err := workflow.NewNexusClient("echo", "echo").ExecuteOperation(ctx, "echo", in, workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Minute}).Get(ctx, &out)
	return out, err
}

// callEcho serves a Nexus service on a worker of c, creates its endpoint,
// and runs a workflow that calls it: the server carries Nexus operations.
func callEcho(ctx context.Context, t *testing.T, c client.Client, id string) {
	t.Helper()
	svc := nexus.NewService("echo")
	require.NoError(t, svc.Register(nexus.NewSyncOperation("echo", func(_ context.Context, in string, _ nexus.StartOperationOptions) (string, error) {
		return "echo " + in, nil
	})))
	w := worker.New(c, "devserver-nexus", worker.Options{})
	w.RegisterNexusService(svc)
	w.RegisterWorkflow(echoCaller)
	require.NoError(t, w.Start())
	defer w.Stop()
	_, err := c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{Name: "echo",
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{Namespace: "default", TaskQueue: "devserver-nexus"}}}}})
	require.NoError(t, err)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "devserver-nexus"}, echoCaller, "hi")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "echo hi", out)
}
