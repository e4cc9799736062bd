package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/toolgate/toolgate/devtls"
	"github.com/toolgate/toolgate/workflows"
)

// `toolgate dev --tls-cert --tls-key --tls-client-ca` serves mutual TLS on
// its address, prints "ready ADDRESS", and its own worker polls (through
// that address, with a client certificate the server made for itself and
// the worker token).
func TestDevServesMutualTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	_, _, err := runKeys(t, "tls", dir)
	require.NoError(t, err)
	f := devtls.Files{CA: filepath.Join(dir, devtls.CAFile), ServerCert: filepath.Join(dir, devtls.ServerCertFile), ServerKey: filepath.Join(dir, devtls.ServerKeyFile),
		ClientCert: filepath.Join(dir, devtls.ClientCertFile), ClientKey: filepath.Join(dir, devtls.ClientKeyFile)}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	address, out := startDev(t, ctx, "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-client-ca", f.CA)
	assert.Contains(t, out, "TLS on "+address+" (client certificates of "+f.CA+" required)")

	pem, err := os.ReadFile(f.CA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	pair, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	require.NoError(t, err)
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	dial := func(tc *tls.Config) (client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return client.DialContext(dctx, client.Options{HostPort: address, Logger: quiet, ConnectionOptions: client.ConnectionOptions{TLS: tc}})
	}

	c, err := dial(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
	require.NoError(t, err, "a client with the CA's certificate connects")
	defer c.Close()
	require.Eventually(t, func() bool {
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
		})
		return err == nil && len(resp.GetPollers()) > 0
	}, 20*time.Second, 100*time.Millisecond, "dev's worker polls %s", workflows.TaskQueue)

	if c, err := dial(&tls.Config{RootCAs: pool}); err == nil {
		_, err = c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
		c.Close()
		require.Error(t, err, "a client without a certificate is refused")
	}
	if c, err := dial(nil); err == nil {
		c.Close()
		t.Fatal("a plaintext client is served")
	}
}

func TestDevTLSFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--tls-cert", "x.pem"}, {"--tls-key", "x.key"}, {"--tls-client-ca", "ca.pem"}} {
		var stdout, stderr strings.Builder
		err := run(context.Background(), append([]string{"dev", "--data", t.TempDir()}, args...), strings.NewReader(""), &stdout, &stderr)
		require.ErrorContains(t, err, "--tls-cert and --tls-key", "%v", args)
	}
}
