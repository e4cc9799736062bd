package bench

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/workflows"
)

// ---------------------------------------------------------------------------
// 8. Side by side with LangGraph.js: the same loop, the same machine, the
// same number of calls.
//
// The harness (langgraph/bench.mjs, with its package.json and
// package-lock.json pinning LangGraph.js and its SQLite checkpointer) is
// embedded in this package and installed with `npm ci` into a directory
// outside the repository (LangGraphDir), only when asked: by
// `toolgate-bench --langgraph`, or by CI. Tests never install it.

//go:embed langgraph/package.json langgraph/package-lock.json langgraph/bench.mjs
var harness embed.FS

// LangGraph variants (see langgraph/bench.mjs).
const (
	LangGraphEcho = "echo" // gate → tool
	LangGraphRead = "read" // gate → memo → tool, as a toolgate read
)

// ErrNoNode says Node.js or npm is missing: the side by side is skipped.
var ErrNoNode = errors.New("node and npm (Node.js) are needed on PATH for the LangGraph.js side by side")

// LangGraphDir is where the harness is installed: $TOOLGATE_LANGGRAPH_DIR,
// else toolgate-bench/langgraph under the user's cache directory.
func LangGraphDir() string {
	if d := os.Getenv("TOOLGATE_LANGGRAPH_DIR"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "toolgate-bench", "langgraph")
}

func harnessFile(name string) []byte {
	b, err := harness.ReadFile("langgraph/" + name)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return b
}

// LangGraphReady says whether dir holds this harness installed: node on
// PATH, and node_modules installed from this package-lock.json (with the
// SQLite driver's native module built). The error says what is missing.
func LangGraphReady(dir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return ErrNoNode
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil || !bytes.Equal(lock, harnessFile("package-lock.json")) {
		return fmt.Errorf("the LangGraph.js harness is not installed in %s (or from another package-lock.json)", dir)
	}
	for _, p := range []string{"node_modules/.package-lock.json", "node_modules/@langchain/langgraph-checkpoint-sqlite/package.json",
		"node_modules/better-sqlite3/build/Release/better_sqlite3.node"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("the LangGraph.js harness in %s is incomplete: no %s (run npm ci there again)", dir, p)
		}
	}
	return nil
}

// InstallLangGraph installs the harness into dir with `npm ci`, unless it is
// installed there already from the same package-lock.json. better-sqlite3
// builds its native module with node-gyp (nothing is downloaded but npm
// packages: when unset, npm_config_nodedir points at the headers installed
// with node, if any).
func InstallLangGraph(ctx context.Context, dir string, log io.Writer) error {
	if LangGraphReady(dir) == nil {
		return nil
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return ErrNoNode
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"package.json", "package-lock.json", "bench.mjs"} {
		if err := os.WriteFile(filepath.Join(dir, name), harnessFile(name), 0o644); err != nil {
			return err
		}
	}
	logf(log, "langgraph: npm ci in %s (builds better-sqlite3: a minute or two)…", dir)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if os.Getenv("npm_config_nodedir") == "" {
		if node, err := exec.LookPath("node"); err == nil {
			if prefix := filepath.Dir(filepath.Dir(node)); fileExists(filepath.Join(prefix, "include", "node", "common.gypi")) {
				cmd.Env = append(cmd.Env, "npm_config_nodedir="+prefix)
			}
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out.String())
	}
	return LangGraphReady(dir)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// LangGraphResult is what one harness run printed.
type LangGraphResult struct {
	Framework          string  `json:"framework"`
	LangGraph          string  `json:"langgraph"`
	Checkpointer       string  `json:"checkpointer"`
	Node               string  `json:"node"`
	Variant            string  `json:"variant"`
	Durability         string  `json:"durability"`
	Calls              int     `json:"calls"`
	Seconds            float64 `json:"seconds"`
	CallsPerSecond     float64 `json:"calls_per_second"`
	P50Ms              float64 `json:"p50_ms"`
	P99Ms              float64 `json:"p99_ms"`
	FirstP50Ms         float64 `json:"first_p50_ms"`
	LastP50Ms          float64 `json:"last_p50_ms"`
	Window             int     `json:"window"`
	Checkpoints        int     `json:"checkpoints"`
	Writes             int     `json:"writes"`
	CheckpointBytes    int64   `json:"checkpoint_bytes"`
	MaxCheckpointBytes int64   `json:"max_checkpoint_bytes"`
	DBBytes            int64   `json:"db_bytes"`
	Trace              int     `json:"trace"`
}

// RunLangGraph runs the harness installed in dir: `calls` sequential calls
// of the variant, checkpointed to a new SQLite file in a temporary directory.
func RunLangGraph(ctx context.Context, dir string, calls int, variant string) (LangGraphResult, error) {
	var r LangGraphResult
	if err := LangGraphReady(dir); err != nil {
		return r, err
	}
	// The script is written next to node_modules (so its imports resolve
	// there), from this build, whatever the install left.
	if err := os.WriteFile(filepath.Join(dir, "bench.mjs"), harnessFile("bench.mjs"), 0o644); err != nil {
		return r, err
	}
	tmp, err := os.MkdirTemp("", "toolgate-bench-langgraph-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "node", "bench.mjs", "--calls", strconv.Itoa(calls), "--variant", variant, "--db", filepath.Join(tmp, "checkpoints.db"))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("node bench.mjs (%d calls, %s): %w\n%s", calls, variant, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, fmt.Errorf("node bench.mjs printed %q: %w", stdout.String(), err)
	}
	if r.Calls != calls || r.Variant != variant {
		return r, fmt.Errorf("node bench.mjs ran %d calls of %q, not %d of %q", r.Calls, r.Variant, calls, variant)
	}
	return r, nil
}

// ToolgateRun is one toolgate run of the side by side.
type ToolgateRun struct {
	Tool    string
	Calls   int
	Runs    int           // in its continue-as-new chain
	Elapsed time.Duration // first start to last close (server times)
	// P50 and P99 of the per-call latency (position.go); regular activities
	// only: local activities run inside workflow tasks, with no events of
	// their own to time them by.
	P50, P99 time.Duration
}

// CallsPerSecond is the run's calls over its time.
func (t ToolgateRun) CallsPerSecond() float64 { return float64(t.Calls) / t.Elapsed.Seconds() }

// SideBySideRow is one size: toolgate with local-activity reads and with
// regular activities, LangGraph.js's two variants.
type SideBySideRow struct {
	Calls          int
	Local, Regular ToolgateRun
	Echo, Read     *LangGraphResult // nil when LangGraph.js did not run
}

// BestLangGraph is the faster LangGraph.js variant's calls per second (0 if none ran).
func (r SideBySideRow) BestLangGraph() float64 {
	best := 0.0
	for _, l := range []*LangGraphResult{r.Echo, r.Read} {
		if l != nil {
			best = max(best, l.CallsPerSecond)
		}
	}
	return best
}

// SideBySide is section 8.
type SideBySide struct {
	HistoryLimit int
	// Skipped says why LangGraph.js did not run ("" when it did).
	Skipped string
	Dir     string
	Rows    []SideBySideRow
}

// MeasureSideBySide installs the harness into dir if needed, then for each
// size runs, one after the other on this machine: AgentRun with echo_local
// calls, AgentRun with echo calls (both always_approve, distinct arguments,
// history_limit limit), and LangGraph.js's echo and read variants. Without
// Node.js the toolgate side still runs and Skipped says why.
func MeasureSideBySide(ctx context.Context, e *Env, sizes []int, limit int, dir string, log io.Writer) (SideBySide, error) {
	sb := SideBySide{HistoryLimit: limit, Dir: dir}
	if err := InstallLangGraph(ctx, dir, log); err != nil {
		if !errors.Is(err, ErrNoNode) {
			return sb, err
		}
		sb.Skipped = err.Error()
		logf(log, "langgraph: skipped: %v", err)
	}
	for _, tool := range []string{EchoLocal, Echo} { // warm-up, not counted
		if _, err := toolgateRun(ctx, e, tool, 10, limit); err != nil {
			return sb, err
		}
	}
	if sb.Skipped == "" {
		if _, err := RunLangGraph(ctx, dir, 10, LangGraphRead); err != nil {
			return sb, err
		}
	}
	for _, n := range sizes {
		row := SideBySideRow{Calls: n}
		var err error
		if row.Local, err = toolgateRun(ctx, e, EchoLocal, n, limit); err != nil {
			return sb, err
		}
		if row.Regular, err = toolgateRun(ctx, e, Echo, n, limit); err != nil {
			return sb, err
		}
		if sb.Skipped == "" {
			for _, v := range []string{LangGraphEcho, LangGraphRead} {
				r, err := RunLangGraph(ctx, dir, n, v)
				if err != nil {
					return sb, err
				}
				if v == LangGraphEcho {
					row.Echo = &r
				} else {
					row.Read = &r
				}
			}
		}
		logf(log, "side by side, %d calls: toolgate local %.1f calls/s, regular %.1f calls/s; LangGraph.js best %.1f calls/s",
			n, row.Local.CallsPerSecond(), row.Regular.CallsPerSecond(), row.BestLangGraph())
		sb.Rows = append(sb.Rows, row)
	}
	return sb, nil
}

// toolgateRun runs AgentRun with n sequential calls of tool (distinct
// arguments, all misses) and times it from its events.
func toolgateRun(ctx context.Context, e *Env, tool string, n, limit int) (ToolgateRun, error) {
	t := ToolgateRun{Tool: tool, Calls: n}
	in := Input(workflows.PolicyAlwaysApprove, Calls(tool, 1, n))
	in.HistoryLimit = limit
	run, out, err := e.Agent(ctx, in)
	if err != nil {
		return t, err
	}
	if len(out.Trace) == 0 || out.Trace[len(out.Trace)-1].CallID != fmt.Sprintf("c-%d", n) {
		return t, fmt.Errorf("run %s: the last trace record is not call c-%d", run.ID, n)
	}
	t.Elapsed = run.Elapsed
	chain, err := e.Chain(ctx, run.ID, run.RunID)
	if err != nil {
		return t, err
	}
	t.Runs = len(chain)
	if tool == Echo {
		var totals []time.Duration
		for _, rh := range chain {
			for _, c := range Positions(rh.History) {
				totals = append(totals, c.Total)
			}
		}
		t.P50, t.P99 = Percentile(totals, 50), Percentile(totals, 99)
	}
	return t, nil
}
