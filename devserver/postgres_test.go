package devserver

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/log"
	pgv12 "go.temporal.io/server/schema/postgresql/v12"

	"github.com/toolgate/toolgate/internal/pgtest"
)

func TestParsePostgresURL(t *testing.T) {
	t.Setenv("PGPASSWORD", "from-env")
	p, err := parsePostgresURL("postgres://tg@db.example:6543/temporal?sslmode=require")
	require.NoError(t, err)
	assert.Equal(t, "temporal", p.history.DatabaseName)
	assert.Equal(t, "temporal_visibility", p.visibility.DatabaseName)
	assert.Equal(t, "db.example:6543", p.history.ConnectAddr)
	assert.Equal(t, "tg", p.history.User)
	assert.Equal(t, "from-env", p.history.Password, "the password comes from PGPASSWORD when the URL has none")
	assert.Equal(t, map[string]string{"sslmode": "require"}, p.visibility.ConnectAttributes)
	assert.Equal(t, PostgresPlugin, p.history.PluginName)
	assert.NotContains(t, p.redacted(), "from-env")

	p, err = parsePostgresURL("postgresql://u:pw@h/d")
	require.NoError(t, err)
	assert.Equal(t, "h:5432", p.history.ConnectAddr)
	assert.Equal(t, "pw", p.history.Password)

	for _, bad := range []string{"mysql://u@h/d", "postgres://u@h/", "postgres://h/d", "postgres://u@h/a/b", "postgres://u@h/d?x=1&x=2"} {
		_, err := parsePostgresURL(bad)
		assert.Error(t, err, bad)
	}
}

// On PostgreSQL, Start creates both databases, applies the schema versions
// of the server's embedded files, registers the namespace and the search
// attributes, keeps a second server off the database, and starts again on it
// with the workflows kept.
func TestPostgresStartSchemaLockRestart(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.FreshDB(t, "devserver")
	opts := Options{Database: dbURL, SearchAttributes: testSearchAttributes}
	s := startServer(t, opts)

	hist, vis, err := PostgresSchemaVersions(dbURL)
	require.NoError(t, err)
	assert.Equal(t, pgv12.Version, hist, "history schema version")
	assert.Equal(t, pgv12.VisibilityVersion, vis, "visibility schema version")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.Address(), Namespace: s.Namespace()})
	require.NoError(t, err)
	defer c.Close()
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	require.NoError(t, err)
	for name, typ := range testSearchAttributes {
		assert.Equal(t, typ, list.GetCustomAttributes()[name], name)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pg-kept", TaskQueue: "nobody-polls"}, "Hello", "x")
	require.NoError(t, err)

	_, err = Start(ctx, opts)
	require.ErrorContains(t, err, "in use by another toolgate server")

	stopServer(t, s)
	s = startServer(t, opts)
	c2, err := client.DialContext(ctx, client.Options{HostPort: s.Address(), Namespace: s.Namespace()})
	require.NoError(t, err)
	defer c2.Close()
	desc, err := c2.DescribeWorkflowExecution(ctx, "pg-kept", run.GetRunID())
	require.NoError(t, err, "the workflow started before the restart is still there")
	assert.Equal(t, "Hello", desc.GetWorkflowExecutionInfo().GetType().GetName())

	// An existing database at the current versions is left as it is.
	hist2, vis2, err := PostgresSchemaVersions(dbURL)
	require.NoError(t, err)
	assert.Equal(t, [2]string{hist, vis}, [2]string{hist2, vis2})
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	defer db.Close()
	var updates int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM schema_update_history`).Scan(&updates))
	assert.Equal(t, 21, updates, "the initial version 0.0 and v1.0 … v1.19, each once, though Start ran twice")
}

// A database an older server release made (history at 1.10, visibility at
// 1.5) is upgraded by Start to the current versions, keeping its data.
func TestPostgresUpgradesAnOlderSchema(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.FreshDB(t, "upgrade")
	p, err := parsePostgresURL(dbURL)
	require.NoError(t, err)
	logger := log.NewNoopLogger()
	require.NoError(t, ensureDatabase(context.Background(), p.url, p.visibility, logger))
	require.NoError(t, migrate(p.history, PostgresSchema, "1.10", logger))
	require.NoError(t, migrate(p.visibility, PostgresVisibilitySchema, "1.5", logger))
	hist, vis, err := PostgresSchemaVersions(dbURL)
	require.NoError(t, err)
	require.Equal(t, [2]string{"1.10", "1.5"}, [2]string{hist, vis}, "the older schema to start from")

	s := startServer(t, Options{Database: dbURL, SearchAttributes: testSearchAttributes})
	hist, vis, err = PostgresSchemaVersions(dbURL)
	require.NoError(t, err)
	assert.Equal(t, [2]string{pgv12.Version, pgv12.VisibilityVersion}, [2]string{hist, vis}, "upgraded by Start")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.Address(), Namespace: s.Namespace()})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "on-upgraded", TaskQueue: "nobody-polls"}, "Hello", "x")
	require.NoError(t, err, "the upgraded database takes workflows")
}
