package devserver

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const taskQueue = "devserver-test"

var testSearchAttributes = map[string]enumspb.IndexedValueType{
	"ToolgateStatus":       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ToolgatePendingTools": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

var (
	statusKey  = temporal.NewSearchAttributeKeyKeyword("ToolgateStatus")
	pendingKey = temporal.NewSearchAttributeKeyKeywordList("ToolgatePendingTools")
)

func Hello(_ workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

func WaitForSignal(ctx workflow.Context, prefix string) (string, error) {
	var v string
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, &v)
	return prefix + v, nil
}

// Gated marks itself as waiting for approval in its search attributes,
// answers the update "approve" and ends on the signal "end".
func Gated(ctx workflow.Context) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		statusKey.ValueSet("waiting_for_approval"),
		pendingKey.ValueSet([]string{"close_ticket"}),
	); err != nil {
		return "", err
	}
	approved := ""
	if err := workflow.SetUpdateHandlerWithOptions(ctx, "approve",
		func(ctx workflow.Context, callID string) (string, error) {
			approved = callID
			return "approved " + callID, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, callID string) error {
			if !strings.HasPrefix(callID, "c-") {
				return temporal.NewApplicationError("unknown call id", "BadCallID")
			}
			return nil
		}},
	); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, "end").Receive(ctx, nil)
	return "done " + approved, nil
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}

func newClient(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.Address(), Namespace: s.Namespace(), Logger: quietLogger()})
	require.NoError(t, err)
	return c
}

func startWorker(t *testing.T, c client.Client) worker.Worker {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(Hello)
	w.RegisterWorkflow(WaitForSignal)
	w.RegisterWorkflow(Gated)
	require.NoError(t, w.Start())
	return w
}

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Logf("Start took %v (frontend %s)", time.Since(began).Round(time.Millisecond), s.Address())
	t.Cleanup(func() { stopServer(t, s) })
	return s
}

func stopServer(t *testing.T, s *Server) {
	t.Helper()
	began := time.Now()
	require.NoError(t, s.Stop())
	t.Logf("Stop took %v", time.Since(began).Round(time.Millisecond))
}

// openFDs counts this process's open file descriptors on path and its
// -wal/-shm files (Linux only).
func openFDs(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, path) {
			n++
		}
	}
	return n
}

// (1) A workflow blocked on a signal survives Stop and Start on the same data
// dir and completes when signaled through a new client and worker.
func TestRestartKeepsWorkflows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := Options{DataDir: dir, SearchAttributes: testSearchAttributes}
	if os.Getenv("DEVSERVER_DEBUG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}

	s1 := startServer(t, opts)
	assert.Equal(t, DefaultNamespace, s1.Namespace())
	assert.Empty(t, s1.UIAddress())
	_, err := Start(ctx, opts)
	require.ErrorContains(t, err, "in use by another Server")

	c1 := newClient(t, s1)
	w1 := startWorker(t, c1)

	run, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hello", TaskQueue: taskQueue}, Hello, "world")
	require.NoError(t, err)
	var greeting string
	require.NoError(t, run.Get(ctx, &greeting))
	assert.Equal(t, "hello world", greeting)

	blocked, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "blocked", TaskQueue: taskQueue}, WaitForSignal, "got ")
	require.NoError(t, err)
	// Let the worker take the first workflow task before the server stops.
	require.Eventually(t, func() bool {
		d, err := c1.DescribeWorkflowExecution(ctx, "blocked", "")
		return err == nil && d.GetPendingWorkflowTask() == nil && d.GetWorkflowExecutionInfo().GetHistoryLength() >= 4
	}, 10*time.Second, 20*time.Millisecond)

	w1.Stop()
	c1.Close()
	dbPath := filepath.Join(dir, dbFileName)
	if runtime.GOOS == "linux" {
		require.Positive(t, openFDs(t, dbPath))
	}
	stopServer(t, s1)
	require.NoError(t, s1.Stop(), "Stop is idempotent")
	if runtime.GOOS == "linux" {
		assert.Zero(t, openFDs(t, dbPath), "Stop closes the SQLite file")
	}

	// The same frontend address again (its port is released), and the same
	// search attributes again (a no-op).
	opts.Address = s1.Address()
	s2 := startServer(t, opts)
	assert.Equal(t, s1.Address(), s2.Address())
	c2 := newClient(t, s2)
	defer c2.Close()

	d, err := c2.DescribeWorkflowExecution(ctx, "blocked", blocked.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus())
	var again string
	require.NoError(t, c2.GetWorkflow(ctx, "hello", "").Get(ctx, &again))
	assert.Equal(t, "hello world", again)

	w2 := startWorker(t, c2)
	defer w2.Stop()
	require.NoError(t, c2.SignalWorkflow(ctx, "blocked", "", "go", "approved"))
	var result string
	require.NoError(t, c2.GetWorkflow(ctx, "blocked", blocked.GetRunID()).Get(ctx, &result))
	assert.Equal(t, "got approved", result)
}

// (2) search attributes, (3) workflow update, (4) WAL, and the UI, on one server.
func TestServerFeatures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startServer(t, Options{
		DataDir:          dir,
		Namespace:        "toolgate-test",
		UIAddress:        "127.0.0.1:0",
		SearchAttributes: testSearchAttributes,
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	assert.Equal(t, "toolgate-test", s.Namespace())
	c := newClient(t, s)
	defer c.Close()
	w := startWorker(t, c)
	defer w.Stop()

	t.Run("namespace", func(t *testing.T) {
		resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		assert.Equal(t, NamespaceRetention, resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	})

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "gated", TaskQueue: taskQueue}, Gated)
	require.NoError(t, err)

	t.Run("search attributes", func(t *testing.T) {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		for name, typ := range testSearchAttributes {
			assert.Equal(t, typ, resp.GetCustomAttributes()[name], name)
		}
		for _, query := range []string{
			`ToolgateStatus="waiting_for_approval"`,
			`ToolgatePendingTools="close_ticket"`,
		} {
			var ids []string
			require.Eventually(t, func() bool {
				resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.Namespace(), Query: query})
				if err != nil {
					t.Logf("ListWorkflow %s: %v", query, err)
					return false
				}
				ids = ids[:0]
				for _, e := range resp.GetExecutions() {
					ids = append(ids, e.GetExecution().GetWorkflowId())
				}
				return len(ids) > 0
			}, 10*time.Second, 100*time.Millisecond, query)
			assert.Equal(t, []string{"gated"}, ids, query)
		}
	})

	t.Run("update", func(t *testing.T) {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   "gated",
			UpdateName:   "approve",
			Args:         []any{"c-3"},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		require.NoError(t, err)
		var got string
		require.NoError(t, h.Get(ctx, &got))
		assert.Equal(t, "approved c-3", got)

		h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   "gated",
			UpdateName:   "approve",
			Args:         []any{"x"},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		require.ErrorContains(t, err, "unknown call id", "the validator refuses the update")

		require.NoError(t, c.SignalWorkflow(ctx, "gated", "", "end", nil))
		require.NoError(t, run.Get(ctx, &got))
		assert.Equal(t, "done c-3", got)
	})

	t.Run("server connection pragmas", func(t *testing.T) {
		dbs, err := pooledSQLite(filepath.Join(dir, dbFileName), false)
		require.NoError(t, err)
		require.Len(t, dbs, 1, "one shared connection pool for the default and the visibility store")
		for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "1" /* NORMAL */, "busy_timeout": "10000"} {
			var got string
			require.NoError(t, dbs[0].QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got))
			assert.Equal(t, want, got, pragma)
		}
	})

	t.Run("wal", func(t *testing.T) {
		db, err := sql.Open("sqlite", filepath.Join(dir, dbFileName))
		require.NoError(t, err)
		defer db.Close()
		var mode string
		require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
		assert.Equal(t, "wal", mode)
		var tables int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'executions'").Scan(&tables))
		assert.Equal(t, 1, tables)
	})

	t.Run("ui", func(t *testing.T) {
		require.NotEmpty(t, s.UIAddress())
		resp, err := http.Get("http://" + s.UIAddress() + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, strings.ToLower(string(body)), "<html")

		// The UI's API proxies to the frontend.
		api, err := http.Get("http://" + s.UIAddress() + "/api/v1/namespaces/" + s.Namespace())
		require.NoError(t, err)
		defer api.Body.Close()
		body, err = io.ReadAll(api.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, api.StatusCode, string(body))
		assert.Contains(t, string(body), `"toolgate-test"`)
	})
}

func TestSearchAttributeTypeConflict(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Options{DataDir: dir, SearchAttributes: testSearchAttributes})
	stopServer(t, s)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{DataDir: dir, SearchAttributes: map[string]enumspb.IndexedValueType{
		"ToolgateStatus": enumspb.INDEXED_VALUE_TYPE_INT,
	}})
	require.ErrorContains(t, err, "ToolgateStatus is Keyword, want Int")

	// The failed Start released the data dir. A search attribute added to an
	// existing namespace is registered through the operator service.
	s = startServer(t, Options{DataDir: dir, SearchAttributes: map[string]enumspb.IndexedValueType{
		"ToolgateExtra": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}})
	c := newClient(t, s)
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	require.NoError(t, err)
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, resp.GetCustomAttributes()["ToolgateExtra"])
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, resp.GetCustomAttributes()["ToolgateStatus"])
	stopServer(t, s)
}

func TestOptionErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Start(ctx, Options{})
	require.ErrorContains(t, err, "DataDir is required")
	_, err = Start(ctx, Options{DataDir: t.TempDir(), Address: "example.com:7233"})
	require.ErrorContains(t, err, "not an IP address")
}
