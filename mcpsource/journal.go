package mcpsource

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/toolgate/toolgate/internal/private"
)

// FileJournal is a Journal in a SQLite file (created 0600): the result of
// each destructive MCP call, by idempotency key, written before the activity
// returns. It closes the window in which toolgate's own retry would call the
// server twice; the window between the server's effect and this write stays
// open for a server that ignores the idempotency key in _meta.
type FileJournal struct{ db *sql.DB }

// OpenJournal opens (or creates) the journal at path.
func OpenJournal(path string) (*FileJournal, error) {
	if err := private.SQLite(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("opening the MCP journal: %w", err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, result BLOB NOT NULL)`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("creating the MCP journal: %w", err)
	}
	return &FileJournal{db: db}, nil
}

// Get returns the result kept for key, if any.
func (j *FileJournal) Get(ctx context.Context, key string) (json.RawMessage, bool, error) {
	var res []byte
	err := j.db.QueryRowContext(ctx, `SELECT result FROM calls WHERE key = ?`, key).Scan(&res)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	return res, err == nil, err
}

// Put keeps result for key (the first result kept for a key stays).
func (j *FileJournal) Put(ctx context.Context, key string, result json.RawMessage) error {
	_, err := j.db.ExecContext(ctx, `INSERT INTO calls (key, result) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, []byte(result))
	return err
}

// Close closes the journal's file.
func (j *FileJournal) Close() error { return j.db.Close() }
