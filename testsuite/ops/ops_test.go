package ops_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/demo"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// toolgateBin is the toolgate binary, built once in TestMain.
var toolgateBin string

// moduleRoot is the toolgate module's directory.
var moduleRoot string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	moduleRoot = root
	dir, err := os.MkdirTemp("", "toolgate-ops-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if toolgateBin, err = testenv.BuildToolgate(dir); err != nil {
		fmt.Fprintf(os.Stderr, "building toolgate: %v\n", err)
		return 1
	}
	return m.Run()
}

// startServer starts the embedded server on a temporary directory, with
// toolgate's search attributes registered, and dials a client of it (with
// metrics, when given); both are stopped when the test ends.
func startServer(t *testing.T, metrics client.MetricsHandler) (*devserver.Server, client.Client) {
	t.Helper()
	return testenv.StartServer(t, testenv.ServerOptions{Timeout: 2 * time.Minute,
		Client: client.Options{Logger: quietLogger(), MetricsHandler: metrics}})
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1})))
}

// startWorker starts toolgate's demo worker (its desk on a temporary
// directory) on cl, stopped when the test ends.
func startWorker(t *testing.T, cl client.Client, searchAttrs bool) sdkworker.Worker {
	t.Helper()
	opts, desk, err := demo.Options(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = desk.Close() })
	opts.SearchAttributes = searchAttrs
	w, err := worker.Start(cl, workflows.TaskQueue, opts)
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return w
}

func proposal(toolName, args string) tool.Proposal {
	return tool.Proposal{Tool: toolName, Args: json.RawMessage(args)}
}

var (
	searchLogin = proposal("search_tickets", `{"query":"login"}`)
	closeTKT3   = proposal("close_ticket", `{"ticket_id":"TKT-3"}`)
)

// seedRun is the seed's walk-through: search, search again (a memo hit),
// close the ticket (held at the gate for a human).
func seedRun() workflows.RunInput {
	return workflows.RunInput{Goal: "find the login ticket and close it",
		Planner: plan.Config{Kind: plan.KindScripted, Turns: [][]tool.Proposal{{searchLogin}, {searchLogin}, {closeTKT3}}, Answer: "closed TKT-3"}}
}

func startRun(t *testing.T, cl client.Client, id string, in workflows.RunInput) client.WorkflowRun {
	t.Helper()
	wr, err := tgclient.New(cl).Start(context.Background(), id, in)
	require.NoError(t, err)
	return wr
}

func result(t *testing.T, wr client.WorkflowRun) workflows.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res workflows.RunResult
	require.NoError(t, wr.Get(ctx, &res))
	return res
}

// waitPending waits until the run's call waits for a human, and returns it.
func waitPending(t *testing.T, cl client.Client, id, callID string) workflows.Interrupt {
	t.Helper()
	var it workflows.Interrupt
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("run %s waiting for %s", id, callID), func() error {
		v, err := cl.QueryWorkflow(context.Background(), id, "", workflows.QueryState)
		if err != nil {
			return err
		}
		var st workflows.State
		if err := v.Get(&st); err != nil {
			return err
		}
		for _, i := range st.Interrupts {
			if i.CallID == callID {
				it = i
				return nil
			}
		}
		return fmt.Errorf("run %s: %s is not waiting (state %+v)", id, callID, st)
	})
	return it
}

// cliResult is one finished toolgate command.
type cliResult struct {
	stdout, stderr string
	code           int
}

// toolgate runs the toolgate binary to the end.
func toolgate(t *testing.T, args ...string) cliResult {
	t.Helper()
	return toolgateEnv(t, nil, args...)
}

// toolgateEnv is toolgate with env added to the environment.
func toolgateEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolgateBin, args...)
	cmd.Dir = moduleRoot
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running toolgate %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// process is a long-running toolgate command (dev, worker).
type process struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	once  sync.Once
}

// startToolgate starts a long-running toolgate command; it is interrupted
// (SIGINT, as Ctrl-C) when the test ends.
func startToolgate(t *testing.T, args ...string) *process {
	t.Helper()
	return startToolgateEnv(t, nil, args...)
}

// startToolgateEnv is startToolgate with env added to the environment.
func startToolgateEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(toolgateBin, args...)
	cmd.Dir = t.TempDir()
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, lines: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// waitLine returns the first line of output starting with prefix.
func (p *process) waitLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("toolgate ended before printing %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("toolgate printed no %q within %s", prefix, within)
		}
	}
}

// stop interrupts the command and waits for it to end cleanly.
func (p *process) stop(t *testing.T) {
	p.once.Do(func() { p.interrupt(t) })
}

func (p *process) interrupt(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	go func() {
		for range p.lines { // drain what is left
		}
	}()
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("toolgate did not stop cleanly on SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("toolgate did not stop within 30s of SIGINT")
	}
}
