package desk

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgate/toolgate/tool"
)

// Ticket statuses.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// SearchArgs are the arguments of search_tickets.
type SearchArgs struct {
	Query  string `json:"query" jsonschema:"Text to look for in ticket titles and bodies, e.g. \"login\"."`
	Limit  int    `json:"limit,omitempty" jsonschema:"Most tickets to return."`
	Status string `json:"status,omitempty" jsonschema:"Only tickets with this status."`
}

// TicketSummary is one ticket in a search result.
type TicketSummary struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

// SearchResult is the result of search_tickets.
type SearchResult struct {
	Tickets []TicketSummary `json:"tickets"`
}

// Search limits.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 50
)

// searchTickets declares and implements search_tickets: a case-insensitive
// substring match on title and body, ordered by id.
func (d *Desk) searchTickets() tool.Tool {
	return tool.New(tool.Spec{
		Name: "search_tickets",
		Description: "Search support tickets whose title or body contains the query (case-insensitive). " +
			"Returns at most `limit` tickets (id, title, status), ordered by id. A read: safe to call at any time; " +
			"use get_ticket for a ticket's full text.",
	}, func(ctx context.Context, args SearchArgs) (SearchResult, error) {
		query := strings.TrimSpace(args.Query)
		if query == "" {
			return SearchResult{}, tool.InvalidArgs("search_tickets: query is empty")
		}
		limit := args.Limit
		if limit == 0 {
			limit = DefaultSearchLimit
		}
		if limit < 1 || limit > MaxSearchLimit {
			return SearchResult{}, tool.InvalidArgs("search_tickets: limit %d is outside 1..%d", args.Limit, MaxSearchLimit)
		}
		status := args.Status
		switch status {
		case "", "any":
			status = ""
		case StatusOpen, StatusClosed:
		default:
			return SearchResult{}, tool.InvalidArgs("search_tickets: status %q: want open, closed or any", args.Status)
		}
		rows, err := d.db.QueryContext(ctx, d.q(`
			SELECT id, title, status FROM tickets
			WHERE (instr(lower(title), lower(?1)) > 0 OR instr(lower(body), lower(?1)) > 0)
			  AND (?2 = '' OR status = ?2)
			ORDER BY seq
			LIMIT ?3`), query, status, limit)
		if err != nil {
			return SearchResult{}, fmt.Errorf("search_tickets: querying: %w", err)
		}
		defer rows.Close()
		res := SearchResult{Tickets: []TicketSummary{}}
		for rows.Next() {
			var t TicketSummary
			if err := rows.Scan(&t.ID, &t.Title, &t.Status); err != nil {
				return SearchResult{}, fmt.Errorf("search_tickets: reading row: %w", err)
			}
			res.Tickets = append(res.Tickets, t)
		}
		if err := rows.Err(); err != nil {
			return SearchResult{}, fmt.Errorf("search_tickets: reading rows: %w", err)
		}
		return res, nil
	}, nonEmpty("query"), func(s *jsonschema.Schema) {
		limit := s.Properties["limit"]
		limit.Minimum, limit.Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(MaxSearchLimit))
		limit.Default = json.RawMessage(strconv.Itoa(DefaultSearchLimit))
		status := s.Properties["status"]
		status.Enum, status.Default = []any{StatusOpen, StatusClosed, "any"}, json.RawMessage(`"any"`)
	})
}

// TicketArgs are the arguments of get_ticket.
type TicketArgs struct {
	TicketID string `json:"ticket_id" jsonschema:"The ticket's id, e.g. \"TKT-3\"."`
}

// Ticket is the result of get_ticket.
type Ticket struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Status string `json:"status"`
	// Resolution is the note given when the ticket was closed.
	Resolution string `json:"resolution,omitempty"`
	// ClosedBy is the idempotency key of the call that closed the ticket.
	ClosedBy string `json:"closed_by,omitempty"`
	// ApprovedBy is who approved that call.
	ApprovedBy string `json:"approved_by,omitempty"`
	// ClosedAt is when it was closed (RFC 3339, UTC).
	ClosedAt string `json:"closed_at,omitempty"`
}

// getTicket declares and implements get_ticket. An unknown id is a permanent
// error (not retried, no fallback).
func (d *Desk) getTicket() tool.Tool {
	return tool.New(tool.Spec{
		Name:        "get_ticket",
		Description: "Read one support ticket in full: title, body, status and, when closed, who closed it and when. A read: safe to call at any time.",
	}, func(ctx context.Context, args TicketArgs) (Ticket, error) {
		return d.Ticket(ctx, args.TicketID)
	}, nonEmpty("ticket_id"))
}

// Ticket reads one ticket (what get_ticket returns). An unknown id is a
// permanent error.
func (d *Desk) Ticket(ctx context.Context, id string) (Ticket, error) {
	var t Ticket
	var resolution, closedKey, approvedBy, closedAt sql.NullString
	err := d.db.QueryRowContext(ctx,
		d.q(`SELECT id, title, body, status, resolution, closed_key, approved_by, closed_at FROM tickets WHERE id = ?`),
		id).Scan(&t.ID, &t.Title, &t.Body, &t.Status, &resolution, &closedKey, &approvedBy, &closedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, tool.Permanent(fmt.Errorf("ticket %s not found", id))
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("reading ticket %s: %w", id, err)
	}
	t.Resolution, t.ClosedBy, t.ApprovedBy, t.ClosedAt = resolution.String, closedKey.String, approvedBy.String, closedAt.String
	return t, nil
}

// CloseArgs are the arguments of close_ticket.
type CloseArgs struct {
	TicketID   string `json:"ticket_id" jsonschema:"The ticket to close, e.g. \"TKT-3\"."`
	Resolution string `json:"resolution,omitempty" jsonschema:"What was done, for the customer and the record."`
}

// CloseResult is the result of close_ticket.
type CloseResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// AlreadyClosed: the ticket was closed before, by another call; nothing changed.
	AlreadyClosed bool `json:"already_closed"`
}

// closeTicket declares and implements close_ticket. It is idempotent by
// design: the ticket records the idempotency key of the call that closed it.
// A repeat of that same call (a retry, or a resume after a crash) returns what
// the first attempt returned; any other call finds it already closed and
// changes nothing.
func (d *Desk) closeTicket() tool.Tool {
	return tool.New(tool.Spec{
		Name: "close_ticket",
		Description: "Close a support ticket, with an optional resolution note for the customer. " +
			"Destructive: it runs only after a human approves this exact call. Closing a ticket that is " +
			"already closed changes nothing and reports already_closed=true.",
		Destructive: true,
		Timeout:     writeTimeout,
		Invalidates: []string{"search_tickets", "get_ticket"},
	}, func(ctx context.Context, args CloseArgs) (CloseResult, error) {
		info, err := callInfo(ctx, "close_ticket")
		if err != nil {
			return CloseResult{}, err
		}
		res := CloseResult{ID: args.TicketID, Status: StatusClosed}
		err = d.inTx(ctx, func(tx *sql.Tx) error {
			var status string
			var closedKey sql.NullString
			err := tx.QueryRowContext(ctx, d.q(`SELECT status, closed_key FROM tickets WHERE id = ?`), args.TicketID).Scan(&status, &closedKey)
			if errors.Is(err, sql.ErrNoRows) {
				return tool.Permanent(fmt.Errorf("ticket %s not found", args.TicketID))
			}
			if err != nil {
				return fmt.Errorf("close_ticket %s: reading: %w", args.TicketID, err)
			}
			if status == StatusClosed {
				// Closed by this very call (an earlier attempt): report what it
				// reported. Closed by another call: already closed.
				res.AlreadyClosed = closedKey.String != info.IdempotencyKey
				return nil
			}
			_, err = tx.ExecContext(ctx,
				d.q(`UPDATE tickets SET status = 'closed', resolution = ?, closed_key = ?, approved_by = ?, closed_at = ? WHERE id = ? AND status = 'open'`),
				args.Resolution, info.IdempotencyKey, approver(info), time.Now().UTC().Format(time.RFC3339), args.TicketID)
			if err != nil {
				return fmt.Errorf("close_ticket %s: updating: %w", args.TicketID, err)
			}
			return nil
		})
		if err != nil {
			return CloseResult{}, err
		}
		if err := d.afterCommit("close_ticket"); err != nil {
			return CloseResult{}, err
		}
		return res, nil
	}, nonEmpty("ticket_id"), maxLength("resolution", 2000))
}
