package e2e

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/activities/desk"
	"github.com/toolgate/toolgate/demo"
)

// The demo is repeatable: a second `toolgate demo --yes` on the same data
// directory finds TKT-3 open again (the demo's own desk, reset to its seed,
// and says so), so c-3 is blocked at the gate, approved and closed as the
// first time. The desk of a `toolgate dev` on that data directory is never
// touched: a change made there is still there, and its TKT-3 is open.
func TestDemoYesTwiceOnOneDataDir(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	devDesk := filepath.Join(data, demo.DeskFile)
	markDevDesk(t, devDesk)

	want := []string{"c-1 search_tickets ok", "c-2 search_tickets cache_hit", "c-3 close_ticket blocked",
		"c-3 close_ticket approved", "c-3 close_ticket ok"}
	for i := 1; i <= 2; i++ {
		out := runDemo(t, "demo", "--yes", "--data", data)
		if tr := traceTables(out); len(tr) != 1 || !slices.Equal(tr[0], want) {
			t.Errorf("demo %d's trace:\n got  %q\n want [%q]\noutput:\n%s", i, tr, want, out)
		}
		for _, line := range []string{
			"demo desk: " + filepath.Join(data, demo.DemoDeskFile) + ", reset to its seed (TKT-3 open, no refunds)\n",
			`ticket TKT-3 "Cannot log in after password reset" is closed`,
		} {
			if !strings.Contains(out, line) {
				t.Errorf("demo %d's output has no %q; output:\n%s", i, line, out)
			}
		}
	}
	checkDevDesk(t, devDesk)
}

// A second `toolgate demo --yes --policy examples/policy.yaml` on the same
// data directory reaches the close's gate again, and its refund run goes as
// the first did — the refunds of the first demo no longer count against
// the bookings' amounts: the small refund runs by rule (PAY-1 again), the
// large one waits for two of finance and is paid (PAY-2 again), the test
// refund is denied by rule.
func TestDemoWithPolicyTwiceOnOneDataDir(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	closing := []string{"c-1 search_tickets ok", "c-2 search_tickets cache_hit", "c-3 close_ticket blocked",
		"c-3 close_ticket approved", "c-3 close_ticket ok"}
	// The refunds' records in the order the trace may show them in (c-1's
	// run and c-2's decisions go on at once).
	refunds := []string{"c-1 refund approved", "c-1 refund ok", "c-2 refund approved", "c-2 refund blocked",
		"c-2 refund ok", "c-3 refund blocked"}
	for i := 1; i <= 2; i++ {
		out := runDemo(t, "demo", "--yes", "--data", data, "--policy", filepath.Join("..", "..", "examples", "policy.yaml"))
		tr := traceTables(out)
		if len(tr) != 2 {
			t.Fatalf("demo %d printed %d traces, want 2 (the close's, the refunds'); output:\n%s", i, len(tr), out)
		}
		if !slices.Equal(tr[0], closing) {
			t.Errorf("demo %d's close:\n got  %q\n want %q", i, tr[0], closing)
		}
		if got := slices.Sorted(slices.Values(tr[1])); !slices.Equal(got, refunds) {
			t.Errorf("demo %d's refunds:\n got  %q\n want %q", i, got, refunds)
		}
		for _, line := range []string{
			"demo desk: " + filepath.Join(data, demo.DemoDeskFile) + ", reset to its seed (TKT-3 open, no refunds)\n",
			"approved c-3 (close_ticket) by alice",
			`"payment_id":"PAY-1","booking_id":"BK-3","amount_cents":3000`,
			"counted c-2 (refund) by bob: 1 of 2 approvals",
			"approved c-2 (refund) by carol: 2 of 2 approvals (bob, carol)",
			`"payment_id":"PAY-2","booking_id":"BK-2","amount_cents":30000`,
			"denied by rule no-test-refunds",
		} {
			if !strings.Contains(out, line) {
				t.Errorf("demo %d's output has no %q", i, line)
			}
		}
		if t.Failed() {
			t.Fatalf("demo %d's output:\n%s", i, out)
		}
	}
}

// runDemo runs the toolgate binary with args (a demo, to its end) and
// returns its output; it fails the test unless it exits 0 within a minute.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateBinary(t), args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("toolgate %s did not finish within a minute; output:\n%s", strings.Join(args, " "), out)
	}
	if err != nil {
		t.Fatalf("toolgate %s: %v; output:\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// traceTables are the "CALL TOOL STATUS" of each trace table a demo printed
// (traceLines reads the first only).
func traceTables(out string) [][]string {
	var tables [][]string
	for rest, ok := out, true; ok; {
		if _, rest, ok = strings.Cut(rest, "\ntrace:\n"); ok {
			tables = append(tables, traceLines("\ntrace:\n"+rest))
		}
	}
	return tables
}

// markDevDesk makes the desk a `toolgate dev` on the data directory uses, at
// path, and closes TKT-1 in it as a run of dev would have: a reset of that
// desk would open it again.
func markDevDesk(t *testing.T, path string) {
	t.Helper()
	d, err := desk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	db := openSQLite(t, path, "")
	if _, err := db.Exec(`UPDATE tickets SET status = 'closed', closed_key = 'dev-run/c-1' WHERE id = 'TKT-1'`); err != nil {
		t.Fatal(err)
	}
}

// checkDevDesk checks that the desk markDevDesk made is as it left it: TKT-1
// closed by its run, TKT-3 open, no refunds.
func checkDevDesk(t *testing.T, path string) {
	t.Helper()
	db := openSQLite(t, path, "mode=ro&")
	for _, c := range []struct {
		query string
		want  string
	}{
		{`SELECT status || ' ' || COALESCE(closed_key, '') FROM tickets WHERE id = 'TKT-1'`, "closed dev-run/c-1"},
		{`SELECT status || ' ' || COALESCE(closed_key, '') FROM tickets WHERE id = 'TKT-3'`, "open "},
		{`SELECT CAST(COUNT(*) AS TEXT) FROM payments`, "0"},
	} {
		var got string
		if err := db.QueryRow(c.query).Scan(&got); err != nil {
			t.Fatalf("the dev desk: %s: %v", c.query, err)
		}
		if got != c.want {
			t.Errorf("the dev desk after the demos: %s = %q, want %q (the demo changed it)", c.query, got, c.want)
		}
	}
}

// openSQLite opens the SQLite file at path with query's options (each
// ending in &).
func openSQLite(t *testing.T, path, query string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?"+query+"_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// `toolgate demo --yes --mcp` twice on one shared directory: each demo
// starts from the sample text (the file reset, and said so), so both read
// the same text first and trace the same calls; a file in the shared
// directory that the demo did not write is never rewritten.
func TestDemoMCPTwiceOnOneShareDir(t *testing.T) {
	t.Parallel()
	share, err := filepath.EvalSymlinks(t.TempDir()) // the server resolves the directories it serves
	if err != nil {
		t.Fatal(err)
	}
	cfg := mcpFilesFile(t, share)
	data := filepath.Join(t.TempDir(), "data")
	file := filepath.Join(share, "hello.txt")
	want := []string{"c-1 " + mcpRead + " ok", "c-2 " + mcpRead + " cache_hit", "c-3 " + mcpWrite + " blocked",
		"c-3 " + mcpWrite + " approved", "c-3 " + mcpWrite + " ok", "c-4 " + mcpRead + " ok"}
	for i, said := range []string{"made with its sample text", "reset to its sample text"} {
		out := runDemo(t, "demo", "--yes", "--mcp", cfg, "--share", share, "--data", data)
		if tr := traceLines(out); !slices.Equal(tr, want) {
			t.Errorf("demo %d's trace:\n got  %q\n want %q", i+1, tr, want)
		}
		if line := "demo file: " + file + ", " + said + "\n"; !strings.Contains(out, line) {
			t.Errorf("demo %d's output has no %q", i+1, line)
		}
		// c-1's line in the trace table: what the first read found.
		_, table, _ := strings.Cut(out, "\ntrace:\n")
		if first, _, _ := strings.Cut(table[strings.Index(table, " c-1 "):], "\n"); !strings.Contains(first, "Hello from the shared directory.") {
			t.Errorf("demo %d's first read did not find the sample text: %s", i+1, first)
		}
		if t.Failed() {
			t.Fatalf("demo %d's output:\n%s", i+1, out)
		}
		if b, err := os.ReadFile(file); err != nil || !strings.HasPrefix(string(b), "Hello again: run demo-mcp-") {
			t.Fatalf("hello.txt after demo %d: %q, %v", i+1, b, err)
		}
	}

	const own = "my own notes\n"
	if err := os.WriteFile(file, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, time.Minute, "demo", "--yes", "--mcp", cfg, "--share", share, "--data", data)
	if code == 0 || !strings.Contains(out, "holds text the demo did not write") {
		t.Errorf("a demo on a hello.txt of someone else's: exit %d, want a refusal; output:\n%s", code, out)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != own {
		t.Errorf("hello.txt after the refused demo: %q, %v; want it untouched", b, err)
	}
}
