package devserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With Nexus (and not HTTPAPI) the server serves its HTTP port, which the
// history service sends Nexus operations to, but refuses every call of the
// HTTP/JSON API on it: a web page's text/plain POST starts no workflow.
// (testsuite/e2e's Nexus tests run operations through that port.)
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
	// gRPC goes on as ever.
	_, err = c.CheckHealth(ctx, nil)
	require.NoError(t, err)
}
