package desk

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// The desk speaks SQLite's dialect; on PostgreSQL (OpenPostgres) each query
// is rewritten once by pgQuery and the result is cached. The rewrite covers
// exactly what the desk's queries use: ? and ?N placeholders, INSERT OR
// IGNORE, instr and INTEGER columns.

// deskLockKey is the transaction-level advisory lock every write transaction
// of a PostgreSQL desk takes first. It serializes the desk's writers across
// processes and machines as SQLite's write lock does across processes, so a
// read-check-write (is this key paid? how much is left to refund? which
// number is next?) cannot interleave with another; the UNIQUE idempotency
// key stays the last guard.
const deskLockKey = 0x6465736b // "desk"

// IsPostgresURL reports whether a --desk-db value names a PostgreSQL database
// (postgres:// or postgresql://) rather than an SQLite file.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// OpenPostgres opens the desk in a PostgreSQL database (a URL such as
// postgres://USER:PASSWORD@HOST:5432/DB?sslmode=disable, for the pgx
// driver), creates its tables if they are missing and seeds the demo data
// (idempotently, as Open does). Several workers may open the same database.
func OpenPostgres(dbURL string) (*Desk, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, fmt.Errorf("desk: opening PostgreSQL: %w", err)
	}
	db.SetMaxOpenConns(8)
	d := &Desk{db: db, pg: true, Flaky: AlwaysFail, attempts: map[string]int{}}
	if err := d.setup(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("desk: preparing PostgreSQL database: %w", err)
	}
	return d, nil
}

// pgQueries caches rewritten queries (the desk's are a fixed set).
var pgQueries sync.Map

// q returns query in the desk database's dialect.
func (d *Desk) q(query string) string {
	if !d.pg {
		return query
	}
	if r, ok := pgQueries.Load(query); ok {
		return r.(string)
	}
	r := pgQuery(query)
	pgQueries.Store(query, r)
	return r
}

// pgQuery rewrites one of the desk's SQLite queries for PostgreSQL. It
// assumes what holds for the desk's queries: no '?' inside string literals.
func pgQuery(query string) string {
	ignore := strings.Contains(query, "INSERT OR IGNORE")
	query = strings.ReplaceAll(query, "INSERT OR IGNORE", "INSERT")
	query = strings.ReplaceAll(query, "instr(", "strpos(")
	query = strings.ReplaceAll(query, " INTEGER", " BIGINT")
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] != '?' {
			b.WriteByte(query[i])
			continue
		}
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		if j > i+1 { // ?N: the same parameter number
			b.WriteString("$" + query[i+1:j])
			i = j - 1
			continue
		}
		n++
		b.WriteString("$" + strconv.Itoa(n))
	}
	if ignore {
		b.WriteString(" ON CONFLICT DO NOTHING")
	}
	return b.String()
}

// Connect opens the desk where spec says: a PostgreSQL URL (OpenPostgres) or
// the path of an SQLite file (Open).
func Connect(spec string) (*Desk, error) {
	if IsPostgresURL(spec) {
		return OpenPostgres(spec)
	}
	return Open(spec)
}
