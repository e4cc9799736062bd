package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// Helpers of typescript_test.go: the SDK, the compiled example, its processes.

// The TypeScript SDK: .ci/run installs it with npm outside the clone, names
// its directory in tsSDKEnv and sets tsRequireEnv.
const (
	// tsSDKEnv names the npm prefix directory whose node_modules holds the
	// SDK, nexus-rpc, typescript and @types/node.
	tsSDKEnv = "TOOLGATE_TS_SDK"
	// tsRequireEnv=1 makes a missing SDK a failure (CI), not a skip.
	tsRequireEnv = "TOOLGATE_REQUIRE_TS"
	// tsSDKPackages are the packages and versions the example pins
	// (examples/typescript/package.json).
	tsSDKPackages = "@temporalio/worker@1.24.0 @temporalio/workflow@1.24.0 @temporalio/client@1.24.0 @temporalio/nexus@1.24.0 " +
		"@temporalio/activity@1.24.0 nexus-rpc@0.0.3 typescript@5.9.3 @types/node@20.19.43"
)

// The example's task queues (its defaults: caller.ts, tools.ts, and
// examples/tools-remote.yaml's task_queue).
const (
	tsCallerQueue = "toolgate-ts-agents"
	tsToolsQueue  = "toolgate-ts-tools"
)

// needTypeScript returns the SDK's npm prefix directory and checks node is on
// PATH. Without them the test is skipped, saying how to install them — or
// fails, when $TOOLGATE_REQUIRE_TS is 1.
func needTypeScript(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(tsSDKEnv)
	problem := ""
	if dir == "" {
		problem = tsSDKEnv + " is not set"
	} else {
		for _, pkg := range []string{"@temporalio/worker", "@temporalio/workflow", "@temporalio/client", "@temporalio/nexus", "@temporalio/activity", "nexus-rpc", "typescript", "@types/node"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
				problem = tsSDKEnv + "=" + dir + ": no " + pkg + " under its node_modules (" + err.Error() + ")"
				break
			}
		}
	}
	if problem == "" {
		if _, err := exec.LookPath("node"); err != nil {
			problem = "node is not on PATH (" + err.Error() + ")"
		}
	}
	if problem != "" {
		msg := problem + ": the TypeScript tests need Node.js and Temporal's TypeScript SDK, installed once (the tests never download it): " +
			"npm install --no-audit --no-fund --prefix /tmp/ts-sdk " + tsSDKPackages + " && export " + tsSDKEnv + "=/tmp/ts-sdk"
		if os.Getenv(tsRequireEnv) == "1" {
			t.Fatalf("%s (%s=1: required here)", msg, tsRequireEnv)
		}
		t.Skip(msg)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// tsExample is examples/typescript compiled into a directory of its own,
// whose node_modules is a link to the SDK's: node and the workflow bundler
// resolve the packages there, and nothing is installed.
type tsExample struct {
	t   *testing.T
	dir string
}

// compileTSExample copies examples/typescript's sources into a temporary
// directory and compiles them with the SDK's tsc (the example's tsconfig.json).
func compileTSExample(t *testing.T) *tsExample {
	t.Helper()
	sdk := needTypeScript(t)
	src := filepath.Join("..", "..", "examples", "typescript")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(src, "src", "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources under %s/src: %v", src, err)
	}
	for _, f := range append(files, filepath.Join(src, "package.json"), filepath.Join(src, "tsconfig.json")) {
		rel, err := filepath.Rel(src, f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir)
	cmd.Dir = dir
	cmd.Env = childEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc -p examples/typescript: %v\n%s", err, out)
	}
	t.Logf("compiled examples/typescript with tsc in %v", time.Since(began).Round(time.Millisecond))
	return &tsExample{t: t, dir: dir}
}

// start runs `node lib/SCRIPT args…` in the example's directory against s's
// server, env added. Its output is kept and logged only if the test fails;
// the process is killed when the test ends.
func (ex *tsExample) start(s *stack, name string, env []string, script string, args ...string) *proc {
	t := ex.t
	t.Helper()
	cmd := exec.Command("node", append([]string{filepath.Join("lib", script)}, args...)...)
	cmd.Dir = ex.dir
	cmd.Env = childEnv(append([]string{"TEMPORAL_ADDRESS=" + s.address(), "TEMPORAL_NAMESPACE=" + devserver.DefaultNamespace}, env...)...)
	return startCmd(t, name, cmd)
}

// startPolling starts a node process and waits until it polls queue for
// tasks of type typ (its pollers carry its pid in their identity, as every
// SDK's default identity pid@host does).
func (ex *tsExample) startPolling(s *stack, name, queue string, typ enumspb.TaskQueueType, env []string, script string, args ...string) *proc {
	t := ex.t
	t.Helper()
	began := time.Now()
	p := ex.start(s, name, env, script, args...)
	prefix := fmt.Sprintf("%d@", p.cmd.Process.Pid)
	testenv.Eventually(t, startTimeout, name+" polling "+queue, func() error {
		if p.exited() {
			t.Fatalf("%s exited before polling: %v\n%s", name, p.waitErr, p.out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		resp, err := s.client.DescribeTaskQueue(ctx, queue, typ)
		if err != nil {
			return err
		}
		for _, pi := range resp.GetPollers() {
			if strings.HasPrefix(pi.GetIdentity(), prefix) {
				return nil
			}
		}
		return fmt.Errorf("no %s poller on %s with identity %s…", typ, queue, prefix)
	})
	t.Logf("%s (pid %d) polling %s after %v", name, p.cmd.Process.Pid, queue, time.Since(began).Round(time.Millisecond))
	return p
}

// startCaller starts the caller's worker (caller.ts: the workflows of
// workflows.ts, bundled at start) and waits until it polls.
func (ex *tsExample) startCaller(s *stack, name string) *proc {
	ex.t.Helper()
	return ex.startPolling(s, name, tsCallerQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW, nil, "caller.js", "worker")
}

// killAndWait sends SIGKILL and waits for the process to be gone.
func killAndWait(t *testing.T, p *proc) {
	t.Helper()
	p.kill()
	err := p.wait(t, 10*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("%s ended %v, want killed by SIGKILL", p.name, err)
	}
}

// startTS starts a workflow of workflows.ts by its type name on the caller's
// task queue, as any client of another language does.
func (s *stack) startTS(id, workflowType string, args ...any) client.WorkflowRun {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tsCallerQueue}, workflowType, args...)
	if err != nil {
		s.t.Fatalf("starting %s %s: %v", workflowType, id, err)
	}
	return run
}

// lastWorkflowTaskBy is the identity of the worker that completed the last
// workflow task of workflow id.
func (s *stack) lastWorkflowTaskBy(id string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	by := ""
	it := s.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			by = a.GetIdentity()
		}
	}
	return by
}
