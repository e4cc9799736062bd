// Package pgtest gives tests a PostgreSQL database of their own: the server
// named by TOOLGATE_TEST_POSTGRES (a URL such as
// postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable),
// a fresh database on it per test, dropped when the test ends.
//
// Without TOOLGATE_TEST_POSTGRES, or when the server does not answer, the
// test is skipped and says why; with TOOLGATE_REQUIRE_POSTGRES=1 (as .ci/run
// sets) it fails instead, so CI cannot skip the PostgreSQL suites silently.
//
// FreshDB and URL take a test; Create is the same database without one (the
// soak uses it).
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Env names the variables pgtest reads.
const (
	EnvURL     = "TOOLGATE_TEST_POSTGRES"
	EnvRequire = "TOOLGATE_REQUIRE_POSTGRES"
)

// URL returns the test server's URL (its maintenance database), or skips
// (fails, under TOOLGATE_REQUIRE_POSTGRES=1) the test when there is none.
func URL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(EnvURL)
	if raw == "" {
		unavailable(t, EnvURL+" is not set (e.g. postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable; .ci/run starts PostgreSQL and sets it)")
	}
	if err := ping(raw); err != nil {
		unavailable(t, fmt.Sprintf("PostgreSQL at %s does not answer: %v", redact(raw), err))
	}
	return raw
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("PostgreSQL is required (%s=1) but %s", EnvRequire, why)
	}
	t.Skipf("skipped: no PostgreSQL: %s", why)
}

func ping(raw string) error {
	db, err := sql.Open("pgx", raw)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// FreshDB creates an empty database (named tg_PREFIX_RANDOM) on the test
// server and returns its URL; it and NAME_visibility (which the embedded
// Temporal server makes next to it) are dropped when the test ends.
func FreshDB(t testing.TB, prefix string) string {
	t.Helper()
	u, drop, err := Create(URL(t), prefix)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(drop)
	return u
}

// Create creates an empty database (named tg_PREFIX_RANDOM) on the server of
// base (a PostgreSQL URL) and returns its URL, and a function that drops it
// and NAME_visibility (which the embedded Temporal server makes next to it).
// It is FreshDB without a test, for the soak.
func Create(base, prefix string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL URL %s: %w", redact(base), err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "tg_" + strings.ToLower(prefix) + "_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", redact(base), err)
	}
	if _, err := admin.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() {
		for _, db := range []string{name, name + "_visibility"} {
			_, _ = admin.Exec(`DROP DATABASE IF EXISTS "` + db + `" WITH (FORCE)`)
		}
		_ = admin.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// WithDB returns the URL raw with its database replaced by name.
func WithDB(t testing.TB, raw, name string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
