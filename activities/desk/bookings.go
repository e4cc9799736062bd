package desk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgate/toolgate/tool"
)

// NightlyRateCents is what one night costs at every demo hotel.
const NightlyRateCents = 12000

// BookArgs are the arguments of book_hotel.
type BookArgs struct {
	Guest  string `json:"guest" jsonschema:"The guest's full name."`
	Hotel  string `json:"hotel" jsonschema:"The hotel's name."`
	Nights int    `json:"nights" jsonschema:"Number of nights."`
	// BookingID, when given, is the id the new booking gets.
	BookingID string `json:"booking_id,omitempty" jsonschema:"Optional id for the new booking; one is chosen when omitted."`
}

// Booking is the result of book_hotel.
type Booking struct {
	BookingID   string `json:"booking_id"`
	Guest       string `json:"guest"`
	Hotel       string `json:"hotel"`
	Nights      int    `json:"nights"`
	AmountCents int64  `json:"amount_cents"`
	// Duplicate: this idempotency key had already booked; the first booking
	// is returned and nothing was booked now.
	Duplicate bool `json:"duplicate"`
}

// bookHotel declares and implements book_hotel. The compliance check runs
// first, before anything is read or written: input that looks like SQL
// injection is returned as an interrupt (tool.Interrupt) for a reviewer, and
// nothing is written — unless a human approved that interrupt
// (tool.InterruptApproved; an approval at the gate does not count). Bookings
// are keyed by the idempotency key, so a re-run returns the same booking.
func (d *Desk) bookHotel() tool.Tool {
	return tool.New(tool.Spec{
		Name: "book_hotel",
		Description: "Book a hotel stay for a guest (1 to 30 nights, 120.00 per night). " +
			"Destructive: it creates a booking and runs only after a human approves. A compliance check " +
			"may hold the booking for a reviewer when the input looks unsafe. A repeat of the same call " +
			"returns the first booking (duplicate=true).",
		Destructive: true,
		Timeout:     writeTimeout,
	}, func(ctx context.Context, args BookArgs) (Booking, error) {
		// The compliance check stands down only for a human who approved its own
		// interrupt: an approval at the gate was given without its message.
		if !tool.InterruptApproved(ctx) {
			if err := complianceCheck(args); err != nil {
				return Booking{}, err // nothing read, nothing written
			}
		}
		args.Guest, args.Hotel, args.BookingID = strings.TrimSpace(args.Guest), strings.TrimSpace(args.Hotel), strings.TrimSpace(args.BookingID)
		if args.Guest == "" || args.Hotel == "" {
			return Booking{}, tool.InvalidArgs("book_hotel: guest and hotel must not be empty")
		}
		if args.Nights < 1 || args.Nights > 30 {
			return Booking{}, tool.InvalidArgs("book_hotel: nights %d is outside 1..30", args.Nights)
		}
		info, err := callInfo(ctx, "book_hotel")
		if err != nil {
			return Booking{}, err
		}
		res, err := d.book(ctx, info, args)
		if err != nil {
			return Booking{}, err
		}
		if err := d.afterCommit("book_hotel"); err != nil {
			return Booking{}, err
		}
		return res, nil
	}, nonEmpty("guest", "hotel", "booking_id"), maxLength("guest", 200), maxLength("hotel", 200), maxLength("booking_id", 64),
		func(s *jsonschema.Schema) {
			s.Properties["nights"].Minimum, s.Properties["nights"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(30.0)
		})
}

// book inserts the booking keyed by the call's idempotency key, or returns
// the booking that key already made (Duplicate set), in one write transaction.
func (d *Desk) book(ctx context.Context, info tool.Info, args BookArgs) (Booking, error) {
	var res Booking
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		first, found, err := d.bookingByKey(ctx, tx, info.IdempotencyKey)
		if err != nil {
			return err
		}
		if found {
			if first.Guest != args.Guest || first.Hotel != args.Hotel || first.Nights != args.Nights ||
				(args.BookingID != "" && args.BookingID != first.BookingID) {
				return tool.Permanent(fmt.Errorf("book_hotel: idempotency key %s already booked %s; refusing a different booking under the same key",
					info.IdempotencyKey, first.BookingID))
			}
			first.Duplicate = true
			res = first
			return nil
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, d.q(`SELECT COALESCE(MAX(seq), 0) + 1 FROM bookings`)).Scan(&seq); err != nil {
			return fmt.Errorf("book_hotel: numbering booking: %w", err)
		}
		id := args.BookingID
		if id == "" {
			id = fmt.Sprintf("BK-%d", seq)
		}
		var taken int
		if err := tx.QueryRowContext(ctx, d.q(`SELECT COUNT(*) FROM bookings WHERE id = ?`), id).Scan(&taken); err != nil {
			return fmt.Errorf("book_hotel: checking id %s: %w", id, err)
		}
		if taken > 0 {
			return tool.Permanent(fmt.Errorf("booking %s already exists", id))
		}
		res = Booking{BookingID: id, Guest: args.Guest, Hotel: args.Hotel, Nights: args.Nights, AmountCents: int64(args.Nights) * NightlyRateCents}
		_, err = tx.ExecContext(ctx, d.q(`
			INSERT INTO bookings (seq, id, guest, hotel, nights, amount_cents, idem_key, approved_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			seq, res.BookingID, res.Guest, res.Hotel, res.Nights, res.AmountCents, info.IdempotencyKey, approver(info),
			time.Now().UTC().Format(time.RFC3339))
		if err != nil {
			return fmt.Errorf("book_hotel: inserting booking: %w", err)
		}
		return nil
	})
	if isUnique(err) {
		// The UNIQUE constraint is the last guard: another writer booked under
		// this key between our check and our insert.
		first, found, err2 := d.bookingByKey(ctx, d.db, info.IdempotencyKey)
		if err2 != nil {
			return Booking{}, err2
		}
		if found {
			first.Duplicate = true
			return first, nil
		}
	}
	return res, err
}

// injectionSigns are what the compliance check looks for, lower-case. The list
// is short on purpose, so a reviewer can read it: it flags input for a human,
// it does not protect the database (every query is parameterised anyway). A
// false alarm ("O'Brien") costs one look from a reviewer, nothing more.
var injectionSigns = []string{
	"'",                  // closes a quoted string
	";",                  // ends a statement
	"--",                 // starts a comment that hides the rest
	"/*",                 // starts a block comment
	"drop table",         // destroys data
	"union select",       // reads other tables
	" or 1=1",            // makes every WHERE true
	"xp_cmdshell",        // runs commands (SQL Server)
	"insert into",        // writes rows
	"delete from",        // deletes rows
	"sleep(",             // time-based probing
	"information_schema", // maps the schema
}

// suspicious returns the signs of SQL injection found in s, if any.
func suspicious(s string) []string {
	lower := strings.ToLower(s)
	var found []string
	for _, sign := range injectionSigns {
		if strings.Contains(lower, sign) {
			found = append(found, strings.TrimSpace(sign))
		}
	}
	return found
}

// complianceCheck returns an interrupt for the reviewer when a string
// argument looks like SQL injection, or nil.
func complianceCheck(args BookArgs) error {
	fields := []struct{ name, value string }{
		{"guest name", args.Guest},
		{"hotel name", args.Hotel},
		{"booking id", args.BookingID},
	}
	for _, f := range fields {
		if signs := suspicious(f.value); len(signs) > 0 {
			return tool.Interrupt(fmt.Sprintf("compliance: %s looks like SQL injection: %q (contains %s); approve only if this is really the %s",
				f.name, f.value, strings.Join(quoteAll(signs), ", "), f.name))
		}
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// bookingByKey returns the booking made under an idempotency key, if any.
func (d *Desk) bookingByKey(ctx context.Context, q queryer, key string) (Booking, bool, error) {
	var b Booking
	err := q.QueryRowContext(ctx, d.q(`SELECT id, guest, hotel, nights, amount_cents FROM bookings WHERE idem_key = ?`), key).
		Scan(&b.BookingID, &b.Guest, &b.Hotel, &b.Nights, &b.AmountCents)
	if errors.Is(err, sql.ErrNoRows) {
		return Booking{}, false, nil
	}
	if err != nil {
		return Booking{}, false, fmt.Errorf("book_hotel: looking up idempotency key %s: %w", key, err)
	}
	return b, true, nil
}
