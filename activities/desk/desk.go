// Package desk is toolgate's demo support desk: tickets, hotel bookings,
// refunds and order tracking kept in an embedded SQLite database, offered to
// agents as tools (Desk.Tools).
//
// Every tool is one method that returns a tool.Tool (its Spec and its
// implementation) and one line in Tools. The specs are declared here, where
// the tools are registered, and nowhere else: a client, planner or model can
// never make a destructive tool look harmless.
//
// Side effects are keyed by the call's idempotency key (tool.InfoFrom), which
// is stored under a UNIQUE constraint in the same transaction as the effect, so
// an activity retry, a worker crash after the commit or a resume after an
// approval never pays, books or closes twice.
package desk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/tool"
)

// Desk is the support desk over one SQLite database file (Open) or a
// PostgreSQL database (OpenPostgres). Its exported fields
// are settings; set them before the desk serves calls.
type Desk struct {
	db *sql.DB
	pg bool // PostgreSQL (OpenPostgres), not SQLite: see q

	// Flaky says how the order carrier behind carrier_status behaves: the
	// number of attempts of each call (counted per call id) that fail before
	// the carrier answers, or AlwaysFail. Open sets AlwaysFail, so the demo
	// shows retries and then the fallback; tests set what they need.
	Flaky int

	// FailAfterCommit is a TEST HOOK and nil in production. When set, the
	// side-effecting tools (close_ticket, refund, book_hotel) call it with
	// their tool name after their transaction has committed and before they
	// return; a non-nil error is returned as the tool's (retryable) error.
	// It simulates "the activity crashed after its side effect", so tests can
	// show that a retry with the same idempotency key does not act twice.
	FailAfterCommit func(tool string) error

	mu       sync.Mutex
	attempts map[string]int // carrier attempts per call id (see Flaky)
}

// writeTimeout bounds one attempt of a side-effecting tool. Its write is one
// short SQLite transaction, so a worker that died mid-attempt is detected (and
// the call retried, with the same idempotency key) after seconds, not minutes.
const writeTimeout = 10 * time.Second

// AlwaysFail is the Flaky setting under which every carrier attempt fails.
const AlwaysFail = -1

// Open opens (creating it if needed) the desk's SQLite database at path,
// creates its schema and seeds the demo data. Seeding is idempotent: opening
// the same file again adds nothing and keeps every change made since.
func Open(path string) (*Desk, error) {
	// The desk's records (who approved which payment) are for the user who
	// runs the worker only.
	if err := private.SQLite(path); err != nil {
		return nil, fmt.Errorf("desk: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(ON)")
	// Write transactions take the write lock when they begin, so a
	// read-check-write in one transaction cannot interleave with another
	// (another process sharing the file included).
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("desk: opening %s: %w", path, err)
	}
	// One connection: SQLite has one writer anyway, and this keeps every
	// transaction of this process strictly one after the other.
	db.SetMaxOpenConns(1)
	d := &Desk{db: db, Flaky: AlwaysFail, attempts: map[string]int{}}
	if err := d.setup(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("desk: preparing %s: %w", path, err)
	}
	return d, nil
}

// Close closes the database.
func (d *Desk) Close() error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("desk: closing database: %w", err)
	}
	return nil
}

// Tools returns every tool of the desk, ready to be registered on a worker
// (each as one activity whose type is the tool's name). Adding a tool is one
// method returning a tool.Tool and one line here.
//
// The specs returned are the declaration; the code that registers them may
// still choose how each runs. For example, to run the fast ticket reads as
// local activities, the registering code sets Local before registering:
//
//	for _, t := range d.Tools() {
//		switch t.Spec.Name {
//		case "search_tickets", "get_ticket":
//			t.Spec.Local = true // a fast read: one marker event, no task round trip
//		}
//		register(t)
//	}
//
// They are declared with Local false: every call is then its own scheduled
// activity, visible as such in the history and the UI.
func (d *Desk) Tools() []tool.Tool {
	return []tool.Tool{
		d.searchTickets(),
		d.getTicket(),
		d.closeTicket(),
		d.refund(),
		d.bookHotel(),
		d.carrierStatus(),
		d.cachedOrderStatus(),
	}
}

// Each tool's argument schema is derived from its argument struct (names,
// types, required fields, descriptions from the jsonschema tags); the tool
// adds what a Go type cannot say with these refinements.

// nonEmpty requires the named string properties to hold at least one character.
func nonEmpty(props ...string) tool.Refine {
	return func(s *jsonschema.Schema) {
		for _, p := range props {
			s.Properties[p].MinLength = jsonschema.Ptr(1)
		}
	}
}

// maxLength bounds the named string property's length.
func maxLength(prop string, n int) tool.Refine {
	return func(s *jsonschema.Schema) { s.Properties[prop].MaxLength = jsonschema.Ptr(n) }
}

// schema is the desk's database schema. Every statement is idempotent.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS tickets (
		seq         INTEGER PRIMARY KEY,
		id          TEXT NOT NULL UNIQUE,
		title       TEXT NOT NULL,
		body        TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('open', 'closed')),
		resolution  TEXT,
		closed_key  TEXT,
		approved_by TEXT,
		closed_at   TEXT
	)`,
	`CREATE TABLE IF NOT EXISTS bookings (
		seq          INTEGER PRIMARY KEY,
		id           TEXT NOT NULL UNIQUE,
		guest        TEXT NOT NULL,
		hotel        TEXT NOT NULL,
		nights       INTEGER NOT NULL,
		amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
		idem_key     TEXT UNIQUE,
		approved_by  TEXT,
		created_at   TEXT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS payments (
		seq          INTEGER PRIMARY KEY,
		id           TEXT NOT NULL UNIQUE,
		booking_id   TEXT NOT NULL REFERENCES bookings(id),
		amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
		reason       TEXT NOT NULL DEFAULT '',
		idem_key     TEXT NOT NULL UNIQUE,
		approved_by  TEXT,
		created_at   TEXT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS orders (
		id         TEXT PRIMARY KEY,
		status     TEXT NOT NULL,
		updated_at TEXT NOT NULL
	)`,
}

// The demo data. Rows are inserted with INSERT OR IGNORE, so seeding twice
// changes nothing.
var (
	seedTickets = []struct{ id, title, body string }{
		{"TKT-1", "Charged twice for the March subscription", "My card was billed twice on March 3rd. Please refund the duplicate charge."},
		{"TKT-2", "Shipping delay on order ORD-1001", "The parcel for ORD-1001 has shown 'in transit' for nine days. Where is it?"},
		{"TKT-3", "Cannot log in after password reset", "I reset my password yesterday and now the login page says my credentials are invalid."},
		{"TKT-4", "Invoice INV-2024-17 is missing our VAT number", "Please reissue the invoice with our VAT number. Downloading invoices also asks me to re-authenticate every time."},
		{"TKT-5", "Feature request: single sign-on with SAML", "We would like SAML authentication (SSO) for our team so nobody needs a separate password."},
	}
	seedBookings = []struct {
		id, guest, hotel string
		nights, amount   int64
	}{
		{"BK-1", "Ada Lovelace", "Hotel Aurora", 2, 24000},
		{"BK-2", "Grace Hopper", "Harbour Inn", 3, 45000},
		{"BK-3", "Alan Turing", "Bletchley Lodge", 1, 9900},
	}
	seedOrders = []struct{ id, status, updatedAt string }{
		{"ORD-1001", "in transit", "2026-03-01T09:00:00Z"},
		{"ORD-1002", "delivered", "2026-02-20T15:30:00Z"},
		{"ORD-1003", "label created", "2026-03-04T11:15:00Z"},
	}
)

// seedTime stamps the seeded bookings.
const seedTime = "2026-01-15T10:00:00Z"

func (d *Desk) setup(ctx context.Context) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, d.q(stmt)); err != nil {
				return fmt.Errorf("creating schema: %w", err)
			}
		}
		return d.seed(ctx, tx)
	})
}

// seed inserts the demo data that is missing; rows already there are kept as
// they are (INSERT OR IGNORE).
func (d *Desk) seed(ctx context.Context, tx *sql.Tx) error {
	for i, t := range seedTickets {
		if _, err := tx.ExecContext(ctx,
			d.q(`INSERT OR IGNORE INTO tickets (seq, id, title, body, status) VALUES (?, ?, ?, ?, 'open')`),
			i+1, t.id, t.title, t.body); err != nil {
			return fmt.Errorf("seeding ticket %s: %w", t.id, err)
		}
	}
	for i, b := range seedBookings {
		if _, err := tx.ExecContext(ctx,
			d.q(`INSERT OR IGNORE INTO bookings (seq, id, guest, hotel, nights, amount_cents, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			i+1, b.id, b.guest, b.hotel, b.nights, b.amount, seedTime); err != nil {
			return fmt.Errorf("seeding booking %s: %w", b.id, err)
		}
	}
	for _, o := range seedOrders {
		if _, err := tx.ExecContext(ctx,
			d.q(`INSERT OR IGNORE INTO orders (id, status, updated_at) VALUES (?, ?, ?)`),
			o.id, o.status, o.updatedAt); err != nil {
			return fmt.Errorf("seeding order %s: %w", o.id, err)
		}
	}
	return nil
}

// Reset puts the desk back to its seed, in one transaction: every ticket
// open again as seeded (no resolution, no closer), every refund paid and
// every booking made since removed, the orders as seeded. The schema stays.
//
// It is for the demo: `toolgate demo` resets a desk file of its own
// (demo.DemoDeskFile, demo.ResetDesk) at its start, so every demo closes TKT-3 and pays its
// refunds afresh. It throws away every change the tools made, and with it the
// record of who approved them: never call it on a desk whose changes matter
// (the one `toolgate dev` and `toolgate worker` use).
func (d *Desk) Reset(ctx context.Context) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		// Payments first: they reference bookings.
		for _, table := range []string{"payments", "bookings", "tickets", "orders"} {
			if _, err := tx.ExecContext(ctx, d.q(`DELETE FROM `+table)); err != nil {
				return fmt.Errorf("emptying %s: %w", table, err)
			}
		}
		return d.seed(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("desk: resetting to the seed: %w", err)
	}
	return nil
}

// inTx runs fn in one transaction and commits it when fn returns nil.
func (d *Desk) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	if d.pg {
		// SQLite's immediate transactions take the write lock at BEGIN; this
		// is PostgreSQL's equivalent for the desk (see deskLockKey).
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", deskLockKey); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("locking the desk: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// afterCommit runs the FailAfterCommit test hook, if set.
func (d *Desk) afterCommit(name string) error {
	if d.FailAfterCommit == nil {
		return nil
	}
	if err := d.FailAfterCommit(name); err != nil {
		return fmt.Errorf("%s: after commit: %w", name, err)
	}
	return nil
}

// callInfo returns the call's info and refuses a side effect without an
// idempotency key: without one, a retry could act twice.
func callInfo(ctx context.Context, name string) (tool.Info, error) {
	info, _ := tool.InfoFrom(ctx)
	if info.IdempotencyKey == "" {
		return info, tool.Permanent(fmt.Errorf("%s: the call has no idempotency key; refusing a side effect that a retry could repeat", name))
	}
	return info, nil
}

// approver names who approved the call, or "" (for a NULL column).
func approver(info tool.Info) sql.NullString {
	if info.Approval == nil || info.Approval.Approver == "" {
		return sql.NullString{}
	}
	return sql.NullString{String: info.Approval.Approver, Valid: true}
}

// isUnique reports whether err is a UNIQUE constraint violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	var pe *pgconn.PgError
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE ||
		errors.As(err, &pe) && pe.Code == "23505" // unique_violation
}
