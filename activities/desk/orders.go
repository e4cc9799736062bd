package desk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/tool"
)

// OrderArgs are the arguments of carrier_status and cached_order_status.
type OrderArgs struct {
	OrderID string `json:"order_id" jsonschema:"The order's id, e.g. \"ORD-1001\"."`
}

// OrderStatus is the result of carrier_status and cached_order_status.
type OrderStatus struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	// AsOf is when the status was true (RFC 3339, UTC).
	AsOf string `json:"as_of"`
	// Source says where the status came from: "carrier" or "desk cache".
	Source string `json:"source"`
	// Stale: the status is the desk's last known one, not the carrier's live answer.
	Stale bool `json:"stale"`
}

// ErrCarrierUnavailable is the transient failure of the order carrier.
var ErrCarrierUnavailable = errors.New("carrier tracking service unavailable (503)")

// orderRefine completes the arguments schema of both order tools (both take
// OrderArgs: the fallback takes the arguments of the call it stands in for).
var orderRefine = nonEmpty("order_id")

// carrierStatus declares and implements carrier_status: it asks the carrier,
// which fails transiently as Desk.Flaky says (a plain error, so the run
// retries it, then falls back to cached_order_status). When the carrier
// answers, its status is read from the orders table, which stands for the
// carrier's own records in this demo.
func (d *Desk) carrierStatus() tool.Tool {
	return tool.New(tool.Spec{
		Name: "carrier_status",
		Description: "Ask the shipping carrier for an order's live delivery status. A read. The carrier is " +
			"unreliable: failures are retried, and when it stays down the desk's last known status " +
			"(cached_order_status, marked stale) is returned instead.",
		Retry: tool.RetryPolicy{
			MaxAttempts:     3,
			InitialInterval: 100 * time.Millisecond,
		},
		Timeout:  5 * time.Second,
		Fallback: "cached_order_status",
	}, func(ctx context.Context, args OrderArgs) (OrderStatus, error) {
		info, _ := tool.InfoFrom(ctx)
		if err := d.callCarrier(info.CallID); err != nil {
			return OrderStatus{}, fmt.Errorf("carrier_status %s: %w", args.OrderID, err)
		}
		st, err := d.orderStatus(ctx, args.OrderID)
		if err != nil {
			return OrderStatus{}, err
		}
		st.AsOf, st.Source = time.Now().UTC().Format(time.RFC3339), "carrier"
		return st, nil
	}, orderRefine)
}

// callCarrier stands for the carrier's API: it fails the first Flaky
// attempts of each call id, or every attempt under AlwaysFail.
func (d *Desk) callCarrier(callID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Flaky == AlwaysFail {
		return ErrCarrierUnavailable
	}
	d.attempts[callID]++
	if d.attempts[callID] <= d.Flaky {
		return ErrCarrierUnavailable
	}
	delete(d.attempts, callID)
	return nil
}

// cachedOrderStatus declares and implements cached_order_status: the desk
// database's last known status of the order, marked stale.
func (d *Desk) cachedOrderStatus() tool.Tool {
	return tool.New(tool.Spec{
		Name: "cached_order_status",
		Description: "Read an order's last known delivery status from the support desk's own records " +
			"(stale=true: it may be behind the carrier). A read; the fallback of carrier_status.",
	}, func(ctx context.Context, args OrderArgs) (OrderStatus, error) {
		st, err := d.orderStatus(ctx, args.OrderID)
		if err != nil {
			return OrderStatus{}, err
		}
		st.Source, st.Stale = "desk cache", true
		return st, nil
	}, orderRefine)
}

// orderStatus reads an order's row; an unknown order is a permanent error.
func (d *Desk) orderStatus(ctx context.Context, orderID string) (OrderStatus, error) {
	st := OrderStatus{OrderID: orderID}
	err := d.db.QueryRowContext(ctx, d.q(`SELECT status, updated_at FROM orders WHERE id = ?`), orderID).Scan(&st.Status, &st.AsOf)
	if errors.Is(err, sql.ErrNoRows) {
		return OrderStatus{}, tool.Permanent(fmt.Errorf("order %s not found", orderID))
	}
	if err != nil {
		return OrderStatus{}, fmt.Errorf("order %s: reading status: %w", orderID, err)
	}
	return st, nil
}
