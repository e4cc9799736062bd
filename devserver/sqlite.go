package devserver

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"go.temporal.io/server/common/config"
	_ "go.temporal.io/server/common/persistence/sql" // registeredSQLPlugins links to its plugin registry
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver (the server's sqlite plugin uses it too)

	"github.com/toolgate/toolgate/internal/private"
)

// Files inside Options.DataDir.
const (
	dbFileName   = "temporal.db"
	lockFileName = "temporal.lock"
)

// sqlConfig is the persistence config for the default and the visibility store.
//
// The sqlite plugin turns every connect attribute that is not an SQLite URI
// parameter into "_pragma=<key>=<value>" on the modernc.org/sqlite DSN, so the
// keys are the bare pragma names. (The "_journal_mode" spelling that the
// temporal CLI and temporaltest use is a leftover from the mattn driver: with
// this plugin it becomes "PRAGMA _journal_mode=wal", which SQLite silently
// ignores.) The plugin also keys its WAL check on "journal_mode".
func sqlConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "NORMAL",
			// Wait instead of failing with SQLITE_BUSY when another process
			// (sqlite3, a test, a backup tool) holds the lock for a moment.
			"busy_timeout": "10000",
		},
		// One connection, as the plugin defaults to: every service of the
		// server shares it (see the plugin's connPool).
		MaxConns:     1,
		MaxIdleConns: 1,
	}
}

// ensureSchema creates the Temporal schema when the database file does not
// exist (or is empty). An existing file is used as it is.
//
// The schema is written into a temporary file in one transaction on a
// connection of our own and then renamed into place, so a crash during the
// first start never leaves a half-initialized database behind.
func ensureSchema(path string) (created bool, err error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		// A file of an older toolgate may be 0644: no longer.
		return false, private.SQLite(path)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("check database file: %w", err)
	}

	tmp := path + ".init"
	removeDBFiles(tmp)
	if err := writeSchema(tmp); err != nil {
		removeDBFiles(tmp)
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		removeDBFiles(tmp)
		return false, fmt.Errorf("install database file: %w", err)
	}
	return true, nil
}

// forgetMembers deletes the cluster membership records of earlier runs.
//
// Every service of the server registers its membership (gossip) address in
// the database and, on start, tries to join the hosts that heartbeated in the
// last 20 seconds. After a restart those are the previous run's services,
// which are gone: ringpop then keeps trying them for its full join timeout
// (30 s) before it gives up and forms a ring of the new services, and until
// then matching has "not enough hosts" and no task is dispatched. The data dir
// is locked, so every record in it belongs to a server that no longer runs.
func forgetMembers(path string) (err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if _, err := db.Exec("DELETE FROM cluster_membership"); err != nil {
		return fmt.Errorf("clear stale cluster membership: %w", err)
	}
	return nil
}

func writeSchema(path string) (err error) {
	// Created 0600 first: SQLite opens an empty file as a new database.
	if err := private.SQLite(path); err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close new database file: %w", cerr)
		}
	}()
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	if err := sqliteschema.SetupSchemaOnDB(schemaTx{tx: tx, name: path}); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("set up schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set up schema: %w", err)
	}
	return nil
}

// schemaTx is the part of sqlplugin.AdminDB that sqlite.SetupSchemaOnDB uses
// (Exec), on a transaction of our own. The embedded interface is nil: any
// other method would panic, and SetupSchemaOnDB calls none of them.
type schemaTx struct {
	sqlplugin.AdminDB
	tx   *sql.Tx
	name string
}

func (s schemaTx) Exec(stmt string, args ...any) error {
	_, err := s.tx.Exec(stmt, args...)
	return err
}
func (s schemaTx) DbName() string     { return s.name }
func (s schemaTx) PluginName() string { return sqliteplugin.PluginName }
func (s schemaTx) Close() error       { return nil }

// dbSuffixes name a database file and the files SQLite keeps next to it.
var dbSuffixes = []string{"", "-journal", "-wal", "-shm"}

func removeDBFiles(path string) {
	for _, suffix := range dbSuffixes {
		_ = os.Remove(path + suffix)
	}
}

// The server's sqlite plugin keeps one *sqlx.DB per DSN in a process-wide pool
// and never closes it (see connPool.Close in
// go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite: the real close
// is commented out). Server.Stop would therefore leave the database file open
// until the process exits, and a later Start on the same file would reuse that
// old connection. releaseSQLite closes the pooled connection of one database
// file and removes it from the pool, so the file is really released and a new
// Start opens it afresh.
//
// There is no exported way to reach the pool, so this reads the plugin
// registry by linkname and the plugin's unexported fields by reflection. Every
// step is checked: if a server upgrade changes the layout, releaseSQLite
// reports that it could not release, and nothing else changes (the connection
// then stays open and is reused, as without this function).

//go:linkname registeredSQLPlugins go.temporal.io/server/common/persistence/sql.supportedPlugins
var registeredSQLPlugins map[string]sqlplugin.Plugin

func releaseSQLite(path string) (released int, err error) {
	dbs, err := pooledSQLite(path, true)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, db := range dbs {
		if err := db.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return len(dbs), errors.Join(errs...)
}

// pooledSQLite returns the pooled connections of the database file at path
// (and, with remove, takes them out of the pool).
func pooledSQLite(path string, remove bool) ([]*sql.DB, error) {
	p, ok := registeredSQLPlugins[sqliteplugin.PluginName]
	if !ok {
		return nil, errors.New("sqlite plugin not registered")
	}
	pv := reflect.ValueOf(p)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("unexpected sqlite plugin type %T", p)
	}
	cpField := pv.Elem().FieldByName("connPool")
	if !cpField.IsValid() || cpField.Kind() != reflect.Pointer || cpField.IsNil() || cpField.Elem().Kind() != reflect.Struct {
		return nil, errors.New("sqlite plugin has no connPool")
	}
	cp := cpField.Elem()
	muField := cp.FieldByName("mu")
	poolField := cp.FieldByName("pool")
	if !muField.IsValid() || muField.Type() != reflect.TypeFor[sync.Mutex]() ||
		!poolField.IsValid() || poolField.Kind() != reflect.Map || poolField.Type().Key().Kind() != reflect.String ||
		poolField.Type().Elem().Kind() != reflect.Struct {
		return nil, errors.New("unexpected sqlite connPool layout")
	}
	// entry.db is a *sqlx.DB, which embeds *sql.DB as its field DB.
	dbField, ok := poolField.Type().Elem().FieldByName("db")
	if !ok || dbField.Type.Kind() != reflect.Pointer || dbField.Type.Elem().Kind() != reflect.Struct {
		return nil, errors.New("unexpected sqlite connPool entry layout")
	}
	sqlDBField, ok := dbField.Type.Elem().FieldByName("DB")
	if !ok || sqlDBField.Type != reflect.TypeFor[*sql.DB]() {
		return nil, errors.New("unexpected sqlite connPool entry layout")
	}

	mu := (*sync.Mutex)(unsafe.Pointer(muField.UnsafeAddr()))
	pool := reflect.NewAt(poolField.Type(), unsafe.Pointer(poolField.UnsafeAddr())).Elem()

	prefix := "file:" + path + "?"
	var dbs []*sql.DB
	mu.Lock()
	defer mu.Unlock()
	for _, key := range pool.MapKeys() {
		if !strings.HasPrefix(key.String(), prefix) {
			continue
		}
		entry := reflect.New(pool.Type().Elem()).Elem()
		entry.Set(pool.MapIndex(key))
		db := entry.FieldByIndex(dbField.Index)
		db = reflect.NewAt(db.Type(), unsafe.Pointer(db.UnsafeAddr())).Elem()
		if !db.IsNil() {
			if sqlDB, _ := db.Elem().FieldByIndex(sqlDBField.Index).Interface().(*sql.DB); sqlDB != nil {
				dbs = append(dbs, sqlDB)
			}
		}
		if remove {
			pool.SetMapIndex(key, reflect.Value{})
		}
	}
	return dbs, nil
}
