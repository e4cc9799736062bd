package desk

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/tool"
)

// onPostgres makes openDesk open a fresh PostgreSQL database instead of an
// SQLite file (set by TestOnPostgres, whose subtests run one at a time).
var onPostgres bool

// openDesk opens a desk on a fresh database (file in a temp dir, or PostgreSQL
// database) and returns where it is, for Connect.
func openDesk(t *testing.T) (*Desk, string) {
	t.Helper()
	if onPostgres {
		u := pgtest.FreshDB(t, "desk")
		d, err := OpenPostgres(u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		return d, u
	}
	path := filepath.Join(t.TempDir(), "desk.db")
	d, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d, path
}

// call runs one tool as a Temporal activity in the SDK's activity test
// environment, the way a worker runs it, and returns its result.
func call(t *testing.T, d *Desk, name string, req tool.Request) (json.RawMessage, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	for _, tl := range d.Tools() {
		env.RegisterActivityWithOptions(tl.Run, activity.RegisterOptions{Name: tl.Spec.Name})
	}
	val, err := env.ExecuteActivity(name, req)
	if err != nil {
		return nil, err
	}
	var resp tool.Response
	require.NoError(t, val.Get(&resp))
	return resp.Result, nil
}

// mustCall is call for a call that must succeed; it decodes the result into out.
func mustCall(t *testing.T, d *Desk, name string, req tool.Request, out any) {
	t.Helper()
	res, err := call(t, d, name, req)
	require.NoError(t, err, "%s %s", name, req.Args)
	require.NoError(t, json.Unmarshal(res, out))
}

func req(key, args string) tool.Request {
	return tool.Request{CallID: "c-1", IdempotencyKey: key, Args: json.RawMessage(args)}
}

// approved is a request approved at the gate.
func approved(key, args string) tool.Request {
	r := req(key, args)
	r.Approval = &tool.Approval{Approver: "alice", Note: "checked", Kind: tool.ApprovedAtGate}
	return r
}

// interruptApproved is a request whose tool interrupted and a human approved that interrupt.
func interruptApproved(key, args string) tool.Request {
	r := req(key, args)
	r.Approval = &tool.Approval{Approver: "alice", Note: "looked at it", Kind: tool.ApprovedInterrupt}
	return r
}

// appError asserts err is an ApplicationError of the given type and returns it.
func appError(t *testing.T, err error, typ string) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T: %v", err, err)
	assert.Equal(t, typ, appErr.Type(), "error: %v", err)
	return appErr
}

func count(t *testing.T, d *Desk, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, d.db.QueryRow(d.q(query), args...).Scan(&n))
	return n
}

func specs(d *Desk) map[string]tool.Spec {
	out := map[string]tool.Spec{}
	for _, tl := range d.Tools() {
		out[tl.Spec.Name] = tl.Spec
	}
	return out
}

func TestOpenSeedsOnce(t *testing.T) {
	d, path := openDesk(t)
	require.NoError(t, d.Close())
	d2, err := Connect(path) // seeding again must add nothing
	require.NoError(t, err)
	defer d2.Close()

	assert.Equal(t, 5, count(t, d2, `SELECT COUNT(*) FROM tickets`))
	assert.Equal(t, 5, count(t, d2, `SELECT COUNT(*) FROM tickets WHERE status = 'open'`))
	assert.Equal(t, 3, count(t, d2, `SELECT COUNT(*) FROM bookings WHERE amount_cents > 0 AND guest <> ''`))
	assert.Equal(t, 0, count(t, d2, `SELECT COUNT(*) FROM payments`))
	if !onPostgres {
		var mode string
		require.NoError(t, d2.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
		assert.Equal(t, "wal", mode)
	}

	var tk Ticket
	mustCall(t, d2, "get_ticket", req("", `{"ticket_id":"TKT-3"}`), &tk)
	assert.Equal(t, "Cannot log in after password reset", tk.Title)
	assert.Equal(t, StatusOpen, tk.Status)
}

func TestSpecsValidateAndSchemasCompile(t *testing.T) {
	d, _ := openDesk(t)
	all := specs(d)
	require.Len(t, all, len(d.Tools()), "tool names must be unique")
	for _, tl := range d.Tools() {
		s := tl.Spec
		t.Run(s.Name, func(t *testing.T) {
			require.NoError(t, tl.Validate(), "spec, derived schema, compiled without loading anything")
			assert.NotEmpty(t, s.Description)
			require.NotNil(t, tl.Run)

			var shape struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
				Required             []string `json:"required"`
				AdditionalProperties *bool    `json:"additionalProperties"`
			}
			require.NoError(t, json.Unmarshal(s.Schema, &shape))
			assert.Equal(t, "object", shape.Type)
			assert.NotEmpty(t, shape.Required)
			require.NotNil(t, shape.AdditionalProperties)
			assert.False(t, *shape.AdditionalProperties)
			for name, p := range shape.Properties {
				assert.NotEmpty(t, p.Description, "property %s: the model is told what it is (a jsonschema tag on the arg struct)", name)
			}

			if s.Fallback != "" {
				fb, ok := all[s.Fallback]
				require.True(t, ok, "fallback %s is not a desk tool", s.Fallback)
				assert.JSONEq(t, string(s.Schema), string(fb.Schema), "a fallback takes the arguments of the call it stands in for")
			}
			for _, name := range s.Invalidates {
				assert.Contains(t, all, name)
			}
		})
	}
}

func TestSpecDeclarations(t *testing.T) {
	d, _ := openDesk(t)
	all := specs(d)
	for name, destructive := range map[string]bool{
		"search_tickets": false, "get_ticket": false, "close_ticket": true, "refund": true,
		"book_hotel": true, "carrier_status": false, "cached_order_status": false,
	} {
		require.Contains(t, all, name)
		assert.Equal(t, destructive, all[name].Destructive, name)
		assert.False(t, all[name].Local, name)
	}
	assert.ElementsMatch(t, []string{"search_tickets", "get_ticket"}, all["close_ticket"].Invalidates)
	assert.Equal(t, "cached_order_status", all["carrier_status"].Fallback)
	assert.EqualValues(t, 3, all["carrier_status"].Attempts())
}

func TestSearchTickets(t *testing.T) {
	d, _ := openDesk(t)
	var res SearchResult
	mustCall(t, d, "search_tickets", req("", `{"query":"login"}`), &res)
	require.Len(t, res.Tickets, 1)
	assert.Equal(t, TicketSummary{ID: "TKT-3", Title: "Cannot log in after password reset", Status: StatusOpen}, res.Tickets[0])

	mustCall(t, d, "search_tickets", req("", `{"query":"AUTH"}`), &res)
	assert.Equal(t, []string{"TKT-4", "TKT-5"}, ids(res), "case-insensitive, title and body, ordered by id")

	mustCall(t, d, "search_tickets", req("", `{"query":"auth","limit":1}`), &res)
	assert.Equal(t, []string{"TKT-4"}, ids(res))

	mustCall(t, d, "search_tickets", req("", `{"query":"auth","status":"closed"}`), &res)
	assert.Empty(t, res.Tickets)

	raw, err := call(t, d, "search_tickets", req("", `{"query":"no such thing"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"tickets":[]}`, string(raw), "an empty result is a list, not null")
}

func ids(res SearchResult) []string {
	var out []string
	for _, tk := range res.Tickets {
		out = append(out, tk.ID)
	}
	return out
}

func TestArgumentsDecodeInAnyKeyOrder(t *testing.T) {
	d, _ := openDesk(t)
	a, err := call(t, d, "search_tickets", req("", `{"query":"auth","limit":5,"status":"open"}`))
	require.NoError(t, err)
	b, err := call(t, d, "search_tickets", req("", `{"status":"open","limit":5,"query":"auth"}`))
	require.NoError(t, err)
	assert.JSONEq(t, string(a), string(b))
}

func TestInvalidArguments(t *testing.T) {
	d, _ := openDesk(t)
	for name, args := range map[string]string{
		"unknown field":  `{"query":"login","bogus":1}`,
		"wrong type":     `{"query":7}`,
		"limit too high": `{"query":"login","limit":51}`,
		"bad status":     `{"query":"login","status":"pending"}`,
		"empty query":    `{"query":"  "}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := call(t, d, "search_tickets", req("", args))
			appErr := appError(t, err, tool.TypeInvalidArgs)
			assert.True(t, appErr.NonRetryable())
		})
	}
}

func TestGetTicketUnknownIsPermanent(t *testing.T) {
	d, _ := openDesk(t)
	_, err := call(t, d, "get_ticket", req("", `{"ticket_id":"TKT-9"}`))
	appErr := appError(t, err, tool.TypeToolFailure)
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), "ticket TKT-9 not found")
}

func TestCloseTicketIsIdempotent(t *testing.T) {
	d, _ := openDesk(t)
	var res CloseResult
	mustCall(t, d, "close_ticket", approved("run-1/c-3", `{"ticket_id":"TKT-3","resolution":"password reset link fixed"}`), &res)
	assert.Equal(t, CloseResult{ID: "TKT-3", Status: StatusClosed, AlreadyClosed: false}, res)

	var tk Ticket
	mustCall(t, d, "get_ticket", req("", `{"ticket_id":"TKT-3"}`), &tk)
	assert.Equal(t, StatusClosed, tk.Status)
	assert.Equal(t, "run-1/c-3", tk.ClosedBy, "the ticket records the idempotency key that closed it")
	assert.Equal(t, "alice", tk.ApprovedBy)
	assert.Equal(t, "password reset link fixed", tk.Resolution)
	closedAt := tk.ClosedAt
	assert.NotEmpty(t, closedAt)

	// The same call again (a retry, a resume): the first outcome, nothing changed.
	mustCall(t, d, "close_ticket", approved("run-1/c-3", `{"ticket_id":"TKT-3"}`), &res)
	assert.False(t, res.AlreadyClosed)

	// Another call: already closed, nothing changed.
	mustCall(t, d, "close_ticket", approved("run-2/c-1", `{"ticket_id":"TKT-3","resolution":"other"}`), &res)
	assert.Equal(t, CloseResult{ID: "TKT-3", Status: StatusClosed, AlreadyClosed: true}, res)
	mustCall(t, d, "get_ticket", req("", `{"ticket_id":"TKT-3"}`), &tk)
	assert.Equal(t, "run-1/c-3", tk.ClosedBy)
	assert.Equal(t, "password reset link fixed", tk.Resolution)
	assert.Equal(t, closedAt, tk.ClosedAt)

	_, err := call(t, d, "close_ticket", approved("run-1/c-4", `{"ticket_id":"TKT-9"}`))
	appError(t, err, tool.TypeToolFailure)
}

func TestSideEffectsNeedAnIdempotencyKey(t *testing.T) {
	d, _ := openDesk(t)
	for name, args := range map[string]string{
		"close_ticket": `{"ticket_id":"TKT-1"}`,
		"refund":       `{"booking_id":"BK-1","amount_cents":100}`,
		"book_hotel":   `{"guest":"Ada","hotel":"Aurora","nights":1}`,
	} {
		_, err := call(t, d, name, approved("", args))
		appError(t, err, tool.TypeToolFailure)
	}
	assert.Equal(t, 0, count(t, d, `SELECT COUNT(*) FROM payments`))
	assert.Equal(t, 0, count(t, d, `SELECT COUNT(*) FROM tickets WHERE status = 'closed'`))
	assert.Equal(t, 3, count(t, d, `SELECT COUNT(*) FROM bookings`))
}

func TestRefundSameKeyPaysOnce(t *testing.T) {
	d, _ := openDesk(t)
	args := `{"booking_id":"BK-2","amount_cents":15000,"reason":"noisy room"}`
	var first, second RefundResult
	mustCall(t, d, "refund", approved("run-1/c-2", args), &first)
	assert.False(t, first.Duplicate)
	assert.Equal(t, "BK-2", first.BookingID)
	assert.EqualValues(t, 15000, first.AmountCents)

	mustCall(t, d, "refund", approved("run-1/c-2", args), &second)
	assert.True(t, second.Duplicate)
	assert.Equal(t, first.PaymentID, second.PaymentID)

	pays, err := d.Payments(context.Background(), "BK-2")
	require.NoError(t, err)
	require.Len(t, pays, 1)
	assert.Equal(t, "run-1/c-2", pays[0].IdempotencyKey)
	assert.Equal(t, "alice", pays[0].ApprovedBy)
}

func TestRefundDifferentKeysPayTwice(t *testing.T) {
	d, _ := openDesk(t)
	args := `{"booking_id":"BK-2","amount_cents":15000}`
	var a, b RefundResult
	mustCall(t, d, "refund", approved("run-1/c-2", args), &a)
	mustCall(t, d, "refund", approved("run-1/c-5", args), &b)
	assert.NotEqual(t, a.PaymentID, b.PaymentID)
	assert.False(t, b.Duplicate)
	pays, err := d.Payments(context.Background(), "BK-2")
	require.NoError(t, err)
	assert.Len(t, pays, 2)
}

func TestRefundRefusals(t *testing.T) {
	d, _ := openDesk(t)
	// BK-3 is 9900 cents: 6000 + 6000 is too much.
	var ok RefundResult
	mustCall(t, d, "refund", approved("k-1", `{"booking_id":"BK-3","amount_cents":6000}`), &ok)
	_, err := call(t, d, "refund", approved("k-2", `{"booking_id":"BK-3","amount_cents":6000}`))
	appErr := appError(t, err, tool.TypeToolFailure)
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "already refunded")

	_, err = call(t, d, "refund", approved("k-3", `{"booking_id":"BK-9","amount_cents":1}`))
	appError(t, err, tool.TypeToolFailure)

	_, err = call(t, d, "refund", approved("k-4", `{"booking_id":"BK-1","amount_cents":0}`))
	appError(t, err, tool.TypeInvalidArgs)

	// A key that paid once cannot be reused for a different refund.
	_, err = call(t, d, "refund", approved("k-1", `{"booking_id":"BK-3","amount_cents":100}`))
	appError(t, err, tool.TypeToolFailure)

	pays, err := d.Payments(context.Background(), "BK-3")
	require.NoError(t, err)
	assert.Len(t, pays, 1)
}

func TestRefundConcurrentSameKeyPaysOnce(t *testing.T) {
	d, path := openDesk(t)
	// A second desk on the same file stands for a second worker process:
	// its own connection, so only SQLite's locking keeps the two apart.
	other, err := Connect(path)
	require.NoError(t, err)
	defer other.Close()
	desks := []*Desk{d, other}
	const n = 8
	results := make([]RefundResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			for _, tl := range desks[i%2].Tools() {
				env.RegisterActivityWithOptions(tl.Run, activity.RegisterOptions{Name: tl.Spec.Name})
			}
			val, err := env.ExecuteActivity("refund", approved("run-1/c-7", `{"booking_id":"BK-1","amount_cents":5000}`))
			if err != nil {
				errs[i] = err
				return
			}
			var resp tool.Response
			if errs[i] = val.Get(&resp); errs[i] == nil {
				errs[i] = json.Unmarshal(resp.Result, &results[i])
			}
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, results[0].PaymentID, results[i].PaymentID)
		if !results[i].Duplicate {
			fresh++
		}
	}
	assert.Equal(t, 1, fresh, "exactly one call paid; the others saw its payment")
	pays, err := d.Payments(context.Background(), "BK-1")
	require.NoError(t, err)
	assert.Len(t, pays, 1)
}

func TestRefundCrashAfterCommitDoesNotPayTwice(t *testing.T) {
	d, _ := openDesk(t)
	crashes := 0
	d.FailAfterCommit = func(name string) error {
		if name == "refund" && crashes == 0 {
			crashes++
			return errors.New("worker lost")
		}
		return nil
	}
	args := `{"booking_id":"BK-2","amount_cents":2500}`
	_, err := call(t, d, "refund", approved("run-1/c-4", args))
	appErr := appError(t, err, tool.TypeToolError)
	assert.False(t, appErr.NonRetryable(), "a crash is retried")

	pays, err := d.Payments(context.Background(), "BK-2")
	require.NoError(t, err)
	require.Len(t, pays, 1, "the payment committed before the crash")

	var retry RefundResult
	mustCall(t, d, "refund", approved("run-1/c-4", args), &retry)
	assert.Equal(t, pays[0].ID, retry.PaymentID)
	assert.True(t, retry.Duplicate)

	pays, err = d.Payments(context.Background(), "BK-2")
	require.NoError(t, err)
	assert.Len(t, pays, 1)
}

const injection = `Robert'); DROP TABLE bookings;--`

func TestBookHotelComplianceInterrupt(t *testing.T) {
	d, _ := openDesk(t)
	args, err := json.Marshal(BookArgs{Guest: injection, Hotel: "Hotel Aurora", Nights: 2})
	require.NoError(t, err)
	_, err = call(t, d, "book_hotel", req("run-1/c-1", string(args)))
	appError(t, err, tool.TypeInterrupt)
	// An approval at the gate was not given with the compliance message in
	// front of the reviewer: the check still interrupts.
	_, err = call(t, d, "book_hotel", approved("run-1/c-1", string(args)))
	appErr := appError(t, err, tool.TypeInterrupt)
	assert.True(t, appErr.NonRetryable())
	var details tool.ErrorDetails
	require.NoError(t, appErr.Details(&details))
	assert.True(t, strings.HasPrefix(details.Message, "compliance: guest name looks like SQL injection: "), details.Message)
	assert.Contains(t, details.Message, injection)

	assert.Equal(t, 3, count(t, d, `SELECT COUNT(*) FROM bookings`), "nothing was written")
	assert.Equal(t, 0, count(t, d, `SELECT COUNT(*) FROM bookings WHERE idem_key = ?`, "run-1/c-1"))

	for _, s := range []string{"x' OR 1=1", "a; b", "x -- y", "/* hi */", "1 UNION SELECT secret", "drop table t"} {
		assert.NotEmpty(t, suspicious(s), s)
	}
	for _, s := range []string{"Ada Lovelace", "Hotel Aurora", "Jean-Luc Picard", "Anne-Marie (Annie) Smith"} {
		assert.Empty(t, suspicious(s), s)
	}
}

func TestBookHotelApprovedBooksOnce(t *testing.T) {
	d, _ := openDesk(t)
	args, err := json.Marshal(BookArgs{Guest: injection, Hotel: "Hotel Aurora", Nights: 2})
	require.NoError(t, err)
	var first, again Booking
	mustCall(t, d, "book_hotel", interruptApproved("run-1/c-1", string(args)), &first)
	assert.Equal(t, "BK-4", first.BookingID)
	assert.Equal(t, injection, first.Guest, "stored verbatim: the SQL is parameterised")
	assert.EqualValues(t, 2*NightlyRateCents, first.AmountCents)
	assert.False(t, first.Duplicate)

	mustCall(t, d, "book_hotel", interruptApproved("run-1/c-1", string(args)), &again)
	assert.True(t, again.Duplicate)
	assert.Equal(t, first.BookingID, again.BookingID)

	assert.Equal(t, 1, count(t, d, `SELECT COUNT(*) FROM bookings WHERE guest = ?`, injection))
	assert.Equal(t, 4, count(t, d, `SELECT COUNT(*) FROM bookings`), "the bookings table is still there")

	// A plain booking needs no compliance approval, and takes a chosen id.
	var plain Booking
	mustCall(t, d, "book_hotel", approved("run-1/c-2", `{"nights":1,"hotel":"Harbour Inn","guest":"Grace Hopper","booking_id":"BK-100"}`), &plain)
	assert.Equal(t, "BK-100", plain.BookingID)
	_, err = call(t, d, "book_hotel", approved("run-1/c-3", `{"nights":1,"hotel":"Harbour Inn","guest":"Grace Hopper","booking_id":"BK-100"}`))
	appError(t, err, tool.TypeToolFailure)
}

func TestCarrierStatusFailsTransientlyAndFallbackAnswers(t *testing.T) {
	d, _ := openDesk(t)
	assert.Equal(t, AlwaysFail, d.Flaky, "the demo default shows retry and fallback")
	_, err := call(t, d, "carrier_status", req("", `{"order_id":"ORD-1001"}`))
	appErr := appError(t, err, tool.TypeToolError)
	assert.False(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), ErrCarrierUnavailable.Error())

	var cached OrderStatus
	mustCall(t, d, "cached_order_status", req("", `{"order_id":"ORD-1001"}`), &cached)
	assert.Equal(t, OrderStatus{OrderID: "ORD-1001", Status: "in transit", AsOf: "2026-03-01T09:00:00Z", Source: "desk cache", Stale: true}, cached)

	_, err = call(t, d, "cached_order_status", req("", `{"order_id":"ORD-9"}`))
	appError(t, err, tool.TypeToolFailure)
}

func TestCarrierStatusFailsThenAnswers(t *testing.T) {
	d, _ := openDesk(t)
	d.Flaky = 2
	r := tool.Request{CallID: "c-9", Args: json.RawMessage(`{"order_id":"ORD-1002"}`)}
	for range 2 {
		_, err := call(t, d, "carrier_status", r)
		appError(t, err, tool.TypeToolError)
	}
	var live OrderStatus
	mustCall(t, d, "carrier_status", r, &live)
	assert.Equal(t, "delivered", live.Status)
	assert.Equal(t, "carrier", live.Source)
	assert.False(t, live.Stale)

	d.Flaky = 0
	mustCall(t, d, "carrier_status", tool.Request{CallID: "c-10", Args: r.Args}, &live)
	assert.Equal(t, "delivered", live.Status)
}

func TestDataSurvivesReopen(t *testing.T) {
	d, path := openDesk(t)
	var closed CloseResult
	mustCall(t, d, "close_ticket", approved("run-1/c-3", `{"ticket_id":"TKT-3"}`), &closed)
	var paid RefundResult
	mustCall(t, d, "refund", approved("run-1/c-4", `{"booking_id":"BK-1","amount_cents":1000}`), &paid)
	require.NoError(t, d.Close())

	d2, err := Connect(path)
	require.NoError(t, err)
	defer d2.Close()
	var tk Ticket
	mustCall(t, d2, "get_ticket", req("", `{"ticket_id":"TKT-3"}`), &tk)
	assert.Equal(t, StatusClosed, tk.Status)
	assert.Equal(t, "run-1/c-3", tk.ClosedBy)

	// The idempotency key is durable: a resume after a restart does not pay again.
	var again RefundResult
	mustCall(t, d2, "refund", approved("run-1/c-4", `{"booking_id":"BK-1","amount_cents":1000}`), &again)
	assert.True(t, again.Duplicate)
	assert.Equal(t, paid.PaymentID, again.PaymentID)
	pays, err := d2.Payments(context.Background(), "BK-1")
	require.NoError(t, err)
	assert.Len(t, pays, 1)
}

// The desk's file (who approved which payment) is its owner's only.
func TestDeskFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "desk.db")
	d, err := Open(path)
	require.NoError(t, err)
	defer d.Close()
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
}

// The schemas are derived from the arg structs; the refinements add what a
// struct cannot say, and the workflow's validator enforces them before a
// call reaches the gate.
func TestDerivedSchemasKeepTheBounds(t *testing.T) {
	d, _ := openDesk(t)
	all := specs(d)
	for _, c := range []struct{ tool, args, want string }{
		{"search_tickets", `{"query":"login","limit":10,"status":"open"}`, ""},
		{"search_tickets", `{"query":"","limit":51,"status":"pending"}`, "arguments do not match the schema: at /limit: maximum: got 51, want 50; at /query: minLength: got 0, want 1; at /status: value must be one of 'open', 'closed', 'any'"},
		{"search_tickets", `{"qurey":"login"}`, "arguments do not match the schema: at /: additional properties 'qurey' not allowed; at /: missing property 'query'"},
		{"get_ticket", `{"ticket_id":""}`, "arguments do not match the schema: at /ticket_id: minLength: got 0, want 1"},
		{"close_ticket", `{"ticket_id":"TKT-3","resolution":"` + strings.Repeat("x", 2001) + `"}`, "arguments do not match the schema: at /resolution: maxLength: got 2,001, want 2,000"},
		{"refund", `{"booking_id":"BK-2","amount_cents":0}`, "arguments do not match the schema: at /amount_cents: minimum: got 0, want 1"},
		{"book_hotel", `{"guest":"Ann","hotel":"","nights":31,"booking_id":""}`, "arguments do not match the schema: at /booking_id: minLength: got 0, want 1; at /hotel: minLength: got 0, want 1; at /nights: maximum: got 31, want 30"},
		{"cached_order_status", `{"order_id":""}`, "arguments do not match the schema: at /order_id: minLength: got 0, want 1"},
	} {
		s, err := tool.CompileSchema(all[c.tool].Schema)
		require.NoError(t, err, c.tool)
		err = s.Validate([]byte(c.args))
		if c.want == "" {
			assert.NoError(t, err, c.tool)
		} else {
			assert.EqualError(t, err, c.want, c.tool)
		}
	}
	var search struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(all["search_tickets"].Schema, &search))
	assert.JSONEq(t, `10`, string(search.Properties["limit"].Default))
	assert.JSONEq(t, `"any"`, string(search.Properties["status"].Default))
}

// Reset (the demo's) puts the desk back to its seed: the closed ticket open
// again with no closer, the refunds and the booking made since gone, so a
// refund the cap refused before is paid again; the schema and the seed stay.
func TestResetReturnsToTheSeed(t *testing.T) {
	d, path := openDesk(t)
	ctx := context.Background()
	var closed CloseResult
	mustCall(t, d, "close_ticket", approved("run-1/c-3", `{"ticket_id":"TKT-3","resolution":"reset the password"}`), &closed)
	var paid RefundResult
	mustCall(t, d, "refund", approved("run-1/c-4", `{"booking_id":"BK-3","amount_cents":9900}`), &paid)
	var booked Booking
	mustCall(t, d, "book_hotel", approved("run-1/c-5", `{"guest":"Ada Lovelace","hotel":"Hotel Aurora","nights":1}`), &booked)
	_, err := call(t, d, "refund", approved("run-1/c-6", `{"booking_id":"BK-3","amount_cents":100}`))
	appError(t, err, tool.TypeToolFailure)
	require.Contains(t, err.Error(), "already refunded")

	require.NoError(t, d.Reset(ctx))

	tk, err := d.Ticket(ctx, "TKT-3")
	require.NoError(t, err)
	assert.Equal(t, Ticket{ID: "TKT-3", Title: "Cannot log in after password reset",
		Body: "I reset my password yesterday and now the login page says my credentials are invalid.", Status: StatusOpen}, tk)
	assert.Equal(t, 5, count(t, d, `SELECT COUNT(*) FROM tickets WHERE status = 'open' AND resolution IS NULL AND closed_key IS NULL`))
	assert.Equal(t, 0, count(t, d, `SELECT COUNT(*) FROM payments`))
	assert.Equal(t, 3, count(t, d, `SELECT COUNT(*) FROM bookings WHERE idem_key IS NULL`))
	assert.Equal(t, 3, count(t, d, `SELECT COUNT(*) FROM bookings`), "the booking made since is gone")
	assert.Equal(t, 3, count(t, d, `SELECT COUNT(*) FROM orders`))

	// The cap counts from the seed again: the same full refund is paid, as
	// new (its key's payment is gone with the rest).
	var again RefundResult
	mustCall(t, d, "refund", approved("run-1/c-4", `{"booking_id":"BK-3","amount_cents":9900}`), &again)
	assert.False(t, again.Duplicate)
	mustCall(t, d, "close_ticket", approved("run-2/c-3", `{"ticket_id":"TKT-3"}`), &closed)
	assert.False(t, closed.AlreadyClosed, "TKT-3 is closed afresh")

	// A reset desk is a desk like any other: opened again, it is as it was left.
	require.NoError(t, d.Close())
	d2, err := Connect(path)
	require.NoError(t, err)
	defer d2.Close()
	pays, err := d2.Payments(ctx, "BK-3")
	require.NoError(t, err)
	assert.Len(t, pays, 1)
}
