package desk

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolgate/toolgate/internal/pgtest"
)

// TestOnPostgres runs the desk's behaviour tests again on PostgreSQL
// (OpenPostgres): the same tools, the UNIQUE idempotency key in the same
// transaction as the effect, two desks (two workers) on one database.
func TestOnPostgres(t *testing.T) {
	pgtest.URL(t) // skips (or fails under TOOLGATE_REQUIRE_POSTGRES=1) without a server
	onPostgres = true
	defer func() { onPostgres = false }()
	for name, test := range map[string]func(*testing.T){
		"OpenSeedsOnce":                   TestOpenSeedsOnce,
		"SearchTickets":                   TestSearchTickets,
		"GetTicketUnknownIsPermanent":     TestGetTicketUnknownIsPermanent,
		"CloseTicketIsIdempotent":         TestCloseTicketIsIdempotent,
		"SideEffectsNeedAnIdempotencyKey": TestSideEffectsNeedAnIdempotencyKey,
		"RefundSameKeyPaysOnce":           TestRefundSameKeyPaysOnce,
		"RefundDifferentKeysPayTwice":     TestRefundDifferentKeysPayTwice,
		"RefundRefusals":                  TestRefundRefusals,
		"RefundConcurrentSameKeyPaysOnce": TestRefundConcurrentSameKeyPaysOnce,
		"RefundCrashAfterCommit":          TestRefundCrashAfterCommitDoesNotPayTwice,
		"BookHotelComplianceInterrupt":    TestBookHotelComplianceInterrupt,
		"BookHotelApprovedBooksOnce":      TestBookHotelApprovedBooksOnce,
		"CarrierStatusFallback":           TestCarrierStatusFailsTransientlyAndFallbackAnswers,
		"DataSurvivesReopen":              TestDataSurvivesReopen,
		"ResetReturnsToTheSeed":           TestResetReturnsToTheSeed,
	} {
		t.Run(name, test)
	}
}

func TestPgQuery(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT a FROM t WHERE x = ? AND y = ?`:                    `SELECT a FROM t WHERE x = $1 AND y = $2`,
		`SELECT a WHERE instr(lower(b), lower(?1)) > 0 LIMIT ?3`:   `SELECT a WHERE strpos(lower(b), lower($1)) > 0 LIMIT $3`,
		`INSERT OR IGNORE INTO o (id) VALUES (?)`:                  `INSERT INTO o (id) VALUES ($1) ON CONFLICT DO NOTHING`,
		`CREATE TABLE t (seq INTEGER PRIMARY KEY, n INTEGER NULL)`: `CREATE TABLE t (seq BIGINT PRIMARY KEY, n BIGINT NULL)`,
	} {
		assert.Equal(t, want, pgQuery(in), in)
	}
}
