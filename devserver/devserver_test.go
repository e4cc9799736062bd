package devserver

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// The frontend's HTTP API has no authentication and takes cross-origin
// text/plain POSTs: by default the server does not serve it, so nothing of
// this process answers a POST that would start a workflow; with HTTPAPI it
// does, at HTTPAddress.
func TestHTTPAPIIsOptIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	fe := endpoint{bindIP: "127.0.0.1", dialIP: "127.0.0.1", port: 7233, address: "127.0.0.1:7233"}
	sqlCfg := sqlConfig(filepath.Join(t.TempDir(), dbFileName))
	cfg, err := serverConfig(fe, sqlCfg, sqlCfg, false, false, nil)
	require.NoError(t, err)
	assert.Zero(t, cfg.Services["frontend"].RPC.HTTPPort, "no HTTP port: the server starts no HTTP API")

	s := startServer(t, Options{DataDir: t.TempDir()})
	assert.Empty(t, s.HTTPAddress())
	if runtime.GOOS == "linux" {
		ports := listeningPorts(t)
		require.NotEmpty(t, ports)
		for _, port := range ports {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			status, body, err := postStart(addr, s.Namespace(), "probe-default", 2*time.Second)
			assert.False(t, err == nil && status == http.StatusOK, "port %d answers the HTTP API: %s", port, body)
		}
		c := newClient(t, s)
		_, err := c.DescribeWorkflowExecution(ctx, "probe-default", "")
		c.Close()
		require.Error(t, err, "no workflow was started over HTTP")
	}
	stopServer(t, s)

	s = startServer(t, Options{DataDir: t.TempDir(), HTTPAPI: true})
	require.NotEmpty(t, s.HTTPAddress())
	status, body, err := postStart(s.HTTPAddress(), s.Namespace(), "probe-http", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)
	c := newClient(t, s)
	defer c.Close()
	_, err = c.DescribeWorkflowExecution(ctx, "probe-http", "")
	require.NoError(t, err, "the opted-in HTTP API started the workflow")
}

// postStart POSTs, as a web page may without a CORS preflight (text/plain),
// a request to start the workflow id on the HTTP API at addr. No answer within
// timeout is no answer.
func postStart(addr, namespace, id string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	url := "http://" + addr + "/api/v1/namespaces/" + namespace + "/workflows/" + id
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
		strings.NewReader(`{"workflowType":{"name":"Hello"},"taskQueue":{"name":"`+taskQueue+`"},"input":{"payloads":[]}}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// listeningPorts returns the TCP ports this process listens on (Linux).
func listeningPorts(t *testing.T) []int {
	t.Helper()
	inodes := map[string]bool{}
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		raw, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" /* LISTEN */ || !inodes[f[9]] {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			require.True(t, ok, line)
			port, err := strconv.ParseUint(hexPort, 16, 16)
			require.NoError(t, err, line)
			ports = append(ports, int(port))
		}
	}
	return ports
}

// The data directory (and every directory Start creates for it) is 0700 and
// every file the server keeps in it 0600, also those an older version left
// 0644.
func TestDataDirIsPrivate(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "new")
	dir := filepath.Join(parent, "data")
	s := startServer(t, Options{DataDir: dir})
	c := newClient(t, s)
	w := startWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hello", TaskQueue: taskQueue}, Hello, "world")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))

	for _, d := range []string{parent, dir} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v", d, fi.Mode().Perm())
	}
	names := assertPrivateFiles(t, dir)
	for _, name := range []string{dbFileName, dbFileName + "-wal", dbFileName + "-shm", lockFileName} {
		assert.Contains(t, names, name)
	}
	w.Stop()
	c.Close()
	stopServer(t, s)

	// Files of an older toolgate are made private on the next start.
	for _, name := range []string{dbFileName, lockFileName} {
		require.NoError(t, os.Chmod(filepath.Join(dir, name), 0o644))
	}
	s = startServer(t, Options{DataDir: dir})
	assertPrivateFiles(t, dir)
	stopServer(t, s)
}

// assertPrivateFiles checks that no file in dir grants group or others any
// permission, and returns their names.
func assertPrivateFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		names = append(names, e.Name())
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v", e.Name(), fi.Mode().Perm())
	}
	return names
}
