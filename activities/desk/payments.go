package desk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgate/toolgate/tool"
)

// RefundArgs are the arguments of refund.
type RefundArgs struct {
	BookingID   string `json:"booking_id" jsonschema:"The booking to refund, e.g. \"BK-2\"."`
	AmountCents int64  `json:"amount_cents" jsonschema:"Amount to refund in cents (15000 is 150.00)."`
	Reason      string `json:"reason,omitempty" jsonschema:"Why the guest is refunded."`
}

// RefundResult is the result of refund.
type RefundResult struct {
	PaymentID   string `json:"payment_id"`
	BookingID   string `json:"booking_id"`
	AmountCents int64  `json:"amount_cents"`
	// Duplicate: this idempotency key had already paid; the first payment is
	// returned and nothing was paid now.
	Duplicate bool `json:"duplicate"`
}

// Payment is one refund paid out, as stored.
type Payment struct {
	ID             string `json:"id"`
	BookingID      string `json:"booking_id"`
	AmountCents    int64  `json:"amount_cents"`
	Reason         string `json:"reason,omitempty"`
	IdempotencyKey string `json:"idempotency_key"`
	ApprovedBy     string `json:"approved_by,omitempty"`
	CreatedAt      string `json:"created_at"`
}

// refund declares and implements refund. The payment is keyed by the call's
// idempotency key (UNIQUE in the payments table); the look-up of that key, the
// check of the booking's remaining amount and the insert happen in one write
// transaction, so a repeated key — retried, resumed or concurrent — returns
// the first payment with Duplicate set and never pays twice.
func (d *Desk) refund() tool.Tool {
	return tool.New(tool.Spec{
		Name: "refund",
		Description: "Refund part or all of a hotel booking's amount to the guest, in cents. " +
			"Destructive: it moves money and runs only after a human approves this exact call. " +
			"The refunds of one booking can never add up to more than the booking's amount. " +
			"A repeat of the same call returns the first payment (duplicate=true) and never pays twice.",
		Destructive: true,
		Timeout:     writeTimeout,
	}, func(ctx context.Context, args RefundArgs) (RefundResult, error) {
		if args.AmountCents <= 0 {
			return RefundResult{}, tool.InvalidArgs("refund: amount_cents must be positive, got %d", args.AmountCents)
		}
		info, err := callInfo(ctx, "refund")
		if err != nil {
			return RefundResult{}, err
		}
		res, err := d.pay(ctx, info, args)
		if err != nil {
			return RefundResult{}, err
		}
		if err := d.afterCommit("refund"); err != nil {
			return RefundResult{}, err
		}
		return res, nil
	}, nonEmpty("booking_id"), maxLength("reason", 500), func(s *jsonschema.Schema) {
		s.Properties["amount_cents"].Minimum = jsonschema.Ptr(1.0)
	})
}

// pay inserts the payment keyed by the call's idempotency key, or returns the
// payment that key already made (Duplicate set), in one write transaction.
func (d *Desk) pay(ctx context.Context, info tool.Info, args RefundArgs) (RefundResult, error) {
	var res RefundResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		first, found, err := d.paymentByKey(ctx, tx, info.IdempotencyKey)
		if err != nil {
			return err
		}
		if found {
			res, err = duplicateOf(first, args)
			return err
		}
		var booked, refunded int64
		err = tx.QueryRowContext(ctx, d.q(`
			SELECT b.amount_cents, CAST(COALESCE((SELECT SUM(p.amount_cents) FROM payments p WHERE p.booking_id = b.id), 0) AS BIGINT)
			FROM bookings b WHERE b.id = ?`), args.BookingID).Scan(&booked, &refunded)
		if errors.Is(err, sql.ErrNoRows) {
			return tool.Permanent(fmt.Errorf("booking %s not found", args.BookingID))
		}
		if err != nil {
			return fmt.Errorf("refund %s: reading booking: %w", args.BookingID, err)
		}
		if refunded+args.AmountCents > booked {
			return tool.Permanent(fmt.Errorf("refund of %d cents on booking %s refused: the booking is %d cents and %d are already refunded",
				args.AmountCents, args.BookingID, booked, refunded))
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, d.q(`SELECT COALESCE(MAX(seq), 0) + 1 FROM payments`)).Scan(&seq); err != nil {
			return fmt.Errorf("refund %s: numbering payment: %w", args.BookingID, err)
		}
		id := fmt.Sprintf("PAY-%d", seq)
		_, err = tx.ExecContext(ctx, d.q(`
			INSERT INTO payments (seq, id, booking_id, amount_cents, reason, idem_key, approved_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			seq, id, args.BookingID, args.AmountCents, args.Reason, info.IdempotencyKey, approver(info),
			time.Now().UTC().Format(time.RFC3339))
		if err != nil {
			return fmt.Errorf("refund %s: inserting payment: %w", args.BookingID, err)
		}
		res = RefundResult{PaymentID: id, BookingID: args.BookingID, AmountCents: args.AmountCents}
		return nil
	})
	if isUnique(err) {
		// The UNIQUE constraint is the last guard: another writer paid under
		// this key between our check and our insert.
		first, found, err2 := d.paymentByKey(ctx, d.db, info.IdempotencyKey)
		if err2 != nil {
			return RefundResult{}, err2
		}
		if found {
			return duplicateOf(first, args)
		}
	}
	return res, err
}

// duplicateOf reports the first payment made under a key. A key reused for a
// different refund is refused rather than silently answered with a payment
// the caller did not ask for.
func duplicateOf(first Payment, args RefundArgs) (RefundResult, error) {
	if first.BookingID != args.BookingID || first.AmountCents != args.AmountCents {
		return RefundResult{}, tool.Permanent(fmt.Errorf(
			"refund: idempotency key %s already paid %s (%d cents on %s); refusing a different refund (%d cents on %s) under the same key",
			first.IdempotencyKey, first.ID, first.AmountCents, first.BookingID, args.AmountCents, args.BookingID))
	}
	return RefundResult{PaymentID: first.ID, BookingID: first.BookingID, AmountCents: first.AmountCents, Duplicate: true}, nil
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const paymentColumns = `id, booking_id, amount_cents, reason, idem_key, COALESCE(approved_by, ''), created_at`

func scanPayment(scan func(dest ...any) error) (Payment, error) {
	var p Payment
	err := scan(&p.ID, &p.BookingID, &p.AmountCents, &p.Reason, &p.IdempotencyKey, &p.ApprovedBy, &p.CreatedAt)
	return p, err
}

// paymentByKey returns the payment made under an idempotency key, if any.
func (d *Desk) paymentByKey(ctx context.Context, q queryer, key string) (Payment, bool, error) {
	p, err := scanPayment(q.QueryRowContext(ctx, d.q(`SELECT `+paymentColumns+` FROM payments WHERE idem_key = ?`), key).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return Payment{}, false, nil
	}
	if err != nil {
		return Payment{}, false, fmt.Errorf("refund: looking up idempotency key %s: %w", key, err)
	}
	return p, true, nil
}

// Payments returns the refunds paid on a booking, oldest first. It is for
// tests and the demo: it lets them count what was actually paid.
func (d *Desk) Payments(ctx context.Context, bookingID string) ([]Payment, error) {
	rows, err := d.db.QueryContext(ctx, d.q(`SELECT `+paymentColumns+` FROM payments WHERE booking_id = ? ORDER BY seq`), bookingID)
	if err != nil {
		return nil, fmt.Errorf("payments of %s: %w", bookingID, err)
	}
	defer rows.Close()
	var out []Payment
	for rows.Next() {
		p, err := scanPayment(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("payments of %s: reading row: %w", bookingID, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payments of %s: %w", bookingID, err)
	}
	return out, nil
}
