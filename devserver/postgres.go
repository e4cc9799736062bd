package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the lock connection
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // registers postgres12 and postgres12_pgx
	toolsschema "go.temporal.io/server/tools/common/schema"
	toolsql "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The embedded schema directories (go.temporal.io/server/schema) and the
// versions they end at: the ones temporalio/admin-tools of the same release
// applies from /etc/temporal/schema/postgresql/v12/{temporal,visibility}/versioned
// (deploy/setup-postgres.sh). deploy/compose_test.go checks that both agree.
const (
	PostgresSchema           = "postgresql/v12/temporal"
	PostgresVisibilitySchema = "postgresql/v12/visibility"
	// PostgresPlugin is the server's SQL plugin Start uses: postgres12 on the
	// pgx driver (the compose file's server uses postgres12, on lib/pq; both
	// read and write the same schema).
	PostgresPlugin = pgplugin.PluginNamePGX
	// PostgresInitialVersion is the version setup-schema records before the
	// versioned updates run (temporal-sql-tool setup-schema -v 0.0).
	PostgresInitialVersion = "0.0"
	// VisibilitySuffix names the visibility database: DB + VisibilitySuffix,
	// as temporal and temporal_visibility in docker-compose.yml.
	VisibilitySuffix = "_visibility"
)

// lockKey is the PostgreSQL advisory lock (per database) a running Server
// holds on its history database, so that a second embedded server keeps off
// it (and Start may forget the membership records of earlier runs).
const lockKey = 0x746f6f6c67617465 // "toolgate"

// pgStores is a parsed Options.Database: the history and the visibility store.
type pgStores struct {
	url        string // the history database's URL, as given
	history    *config.SQL
	visibility *config.SQL
}

// parsePostgresURL parses postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?PARAMS].
// The password may also come from PGPASSWORD; PARAMS (sslmode=disable, ...)
// become the plugin's connect attributes. Visibility goes to DB_visibility.
func parsePostgresURL(raw string) (*pgStores, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("database URL: scheme %q: want postgres://USER@HOST:PORT/DB", u.Scheme)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("database URL: want one database name in the path, have %q", u.Path)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, errors.New("database URL: no host")
	}
	if port == "" {
		port = "5432"
	}
	user := u.User.Username()
	if user == "" {
		return nil, errors.New("database URL: no user")
	}
	pw, ok := u.User.Password()
	if !ok {
		pw = os.Getenv("PGPASSWORD")
	}
	attrs := map[string]string{}
	for k, vs := range u.Query() {
		if len(vs) != 1 {
			return nil, fmt.Errorf("database URL: parameter %s given %d times", k, len(vs))
		}
		attrs[k] = vs[0]
	}
	store := func(name string) *config.SQL {
		return &config.SQL{
			PluginName:        PostgresPlugin,
			DatabaseName:      name,
			ConnectAddr:       net.JoinHostPort(host, port),
			ConnectProtocol:   "tcp",
			User:              user,
			Password:          pw,
			ConnectAttributes: attrs,
			// The values of the server's docker config template.
			MaxConns:        20,
			MaxIdleConns:    20,
			MaxConnLifetime: time.Hour,
		}
	}
	if !ok && pw != "" {
		u.User = url.UserPassword(user, pw)
	}
	return &pgStores{url: u.String(), history: store(db), visibility: store(db + VisibilitySuffix)}, nil
}

// redacted is the URL without its password, for messages.
func (p *pgStores) redacted() string {
	u, err := url.Parse(p.url)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// pgLock is a held advisory lock: the session that holds it.
type pgLock struct {
	db   *sql.DB
	conn *sql.Conn
}

// lockPostgres takes the advisory lock on the history database (creating the
// database first if it is missing), or fails if another server holds it.
func lockPostgres(ctx context.Context, p *pgStores, logger log.Logger) (*pgLock, error) {
	if err := ensureDatabase(ctx, p.url, p.history, logger); err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", p.url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.redacted(), err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s: %w", p.redacted(), err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", int64(lockKey)).Scan(&got); err != nil {
		_ = conn.Close()
		_ = db.Close()
		return nil, fmt.Errorf("lock %s: %w", p.redacted(), err)
	}
	if !got {
		_ = conn.Close()
		_ = db.Close()
		return nil, fmt.Errorf("database %s is in use by another toolgate server: %w", p.redacted(), ErrDataInUse)
	}
	return &pgLock{db: db, conn: conn}, nil
}

// forgetMembers deletes the cluster membership records of earlier runs (see
// the SQLite forgetMembers): the lock says no other server uses them.
func (l *pgLock) forgetMembers(ctx context.Context) error {
	if _, err := l.conn.ExecContext(ctx, "DELETE FROM cluster_membership"); err != nil {
		return fmt.Errorf("clear stale cluster membership: %w", err)
	}
	return nil
}

// release ends the session, which releases the lock.
func (l *pgLock) release() error {
	return errors.Join(l.conn.Close(), l.db.Close())
}

// ensureDatabase creates the database of cfg if connecting to it says it does
// not exist (SQLSTATE 3D000), through the "postgres" maintenance database.
func ensureDatabase(ctx context.Context, rawURL string, cfg *config.SQL, logger log.Logger) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + cfg.DatabaseName
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return fmt.Errorf("open database %s: %w", cfg.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	err = db.PingContext(ctx)
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
		if err != nil {
			return fmt.Errorf("connect to database %s at %s: %w", cfg.DatabaseName, cfg.ConnectAddr, err)
		}
		return nil
	}
	c := *cfg
	if err := toolsql.DoCreateDatabase(&c, "postgres", logger); err != nil {
		return fmt.Errorf("create database %s: %w", cfg.DatabaseName, err)
	}
	return nil
}

// ensurePostgresSchema creates the visibility database if it is missing and
// brings both schemas to the versions of the embedded schema files, as
// temporal-sql-tool's setup-schema -v 0.0 and update-schema do in
// deploy/setup-postgres.sh: versions a database already has are skipped.
func ensurePostgresSchema(ctx context.Context, p *pgStores, logger log.Logger) error {
	if err := ensureDatabase(ctx, p.url, p.visibility, logger); err != nil {
		return err
	}
	for _, s := range []struct {
		cfg    *config.SQL
		schema string
	}{{p.history, PostgresSchema}, {p.visibility, PostgresVisibilitySchema}} {
		if err := migrate(s.cfg, s.schema, "", logger); err != nil {
			return fmt.Errorf("schema %s in database %s: %w", s.schema, s.cfg.DatabaseName, err)
		}
	}
	return nil
}

// migrate sets the schema up if the database has none and updates it to
// target ("" for the last version of the embedded files).
func migrate(cfg *config.SQL, schemaName, target string, logger log.Logger) error {
	c := *cfg
	conn, err := toolsql.NewConnection(&c, logger)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := toolsschema.NewSetupSchemaTask(conn, &toolsschema.SetupConfig{InitialVersion: PostgresInitialVersion}, logger).Run(); err != nil {
		return fmt.Errorf("setup-schema: %w", err)
	}
	if err := toolsschema.NewUpdateSchemaTask(conn, &toolsschema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: schemaName, TargetVersion: target}, logger).Run(); err != nil {
		return fmt.Errorf("update-schema: %w", err)
	}
	return nil
}

// PostgresSchemaVersions reads the schema versions of the history and the
// visibility database of a PostgreSQL URL, for tests and diagnostics.
func PostgresSchemaVersions(rawURL string) (history, visibility string, err error) {
	p, err := parsePostgresURL(rawURL)
	if err != nil {
		return "", "", err
	}
	read := func(cfg *config.SQL) (string, error) {
		c := *cfg
		conn, err := toolsql.NewConnection(&c, log.NewNoopLogger())
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ReadSchemaVersion()
	}
	if history, err = read(p.history); err != nil {
		return "", "", fmt.Errorf("history schema version: %w", err)
	}
	if visibility, err = read(p.visibility); err != nil {
		return "", "", fmt.Errorf("visibility schema version: %w", err)
	}
	return history, visibility, nil
}

// postgresShards is the number of history shards of a new PostgreSQL
// database: the default of the temporalio/server image (NUM_HISTORY_SHARDS),
// so that the compose file's server could take the database over. It is fixed
// once the database has it.
const postgresShards = 4

// startPostgres is Start with Options.Database.
func startPostgres(ctx context.Context, opts Options) (_ *Server, err error) {
	p, err := parsePostgresURL(opts.Database)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	ns := opts.namespace()
	ctx, cancel := boundStart(ctx)
	defer cancel()
	s := &Server{namespace: ns, authority: opts.authorityNamespace(), pg: p, logger: newServerLogger(opts.Logger)}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	defer func() {
		if r := recover(); r != nil { // the server's logger panics on Fatal, the schema tool calls it
			err = fmt.Errorf("devserver: start: %v", r)
		}
	}()
	if s.pgLock, err = lockPostgres(ctx, p, s.logger); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if err := ensurePostgresSchema(ctx, p, s.logger); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if err := s.pgLock.forgetMembers(ctx); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if err := s.start(ctx, opts); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// registerNamespace registers the namespace ns (retention NamespaceRetention)
// through the frontend: with PostgreSQL, Start does not write it into the
// database itself. One that exists by now is fine.
func (s *Server) registerNamespace(ctx context.Context, ws workflowservice.WorkflowServiceClient, ns string) error {
	_, err := ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(NamespaceRetention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %q: %w", ns, err)
	}
	return errors.New("namespace registered, not yet served")
}
