// The toolgate Nexus service, as a workflow of another team sees it: its name,
// its two operations and the JSON they take and give (package nexusserve on
// the Go side). Imported by workflow code, so it holds nothing but the
// definition and types: no I/O, no Node.js APIs.
import * as nexus from 'nexus-rpc';

/** The Nexus endpoint an operator creates for toolgate (`toolgate dev --nexus-endpoint toolgate`). */
export const ENDPOINT = 'toolgate';

/** A run's status (state.status, RunResult.status). */
export type RunStatus = 'running' | 'waiting_for_approval' | 'waiting_for_input' | 'completed' | 'blocked' | 'failed';

/**
 * How a call ended: it produced a result (ok, cache_hit: answered from the
 * run's memo, responded: a human answered in the tool's place), or it did not
 * run (rejected, cancelled, expired, blocked, error).
 */
export type CallStatus = 'ok' | 'cache_hit' | 'responded' | 'rejected' | 'cancelled' | 'expired' | 'blocked' | 'error';

/** A tool call as a planner proposes it. */
export interface Proposal {
  tool: string;
  args?: unknown;
}

/** A run's planner. A session run a call starts has the planner "external": its calls come from its callers. */
export interface PlannerConfig {
  kind: 'scripted' | 'support' | 'openai' | 'external';
  /** scripted: the steps, each a list of calls proposed together. */
  turns?: Proposal[][];
  /** scripted: the final answer. */
  answer?: string;
  /** openai: the model and its endpoint (the worker holds the key). */
  model?: string;
  base_url?: string;
}

/** The input of an AgentRun (workflows.RunInput), read strictly: a field it does not have is refused. */
export interface RunInput {
  goal: string;
  planner: PlannerConfig;
  /** human (default), deny or always_approve. */
  approval?: 'human' | 'deny' | 'always_approve';
  /** Durations are Go duration text: "24h", "90m". */
  approval_timeout?: string;
  max_turns?: number;
  session?: boolean;
  idle_timeout?: string;
  history_limit?: number;
  memo_entries?: number;
  memo_bytes?: number;
  /** Under an approval policy: the requester's signed start (`toolgate nexus sign-start`). */
  request_token?: string;
}

/** The input of the call operation (nexusserve.CallInput); a field it does not have is refused. */
export interface CallInput {
  /** The session run's name: its workflow id is "nexus-" + run (1 to 64 letters, digits, '.', '_', '-'). */
  run: string;
  tool: string;
  /** The call's arguments, a JSON object (default {}). */
  args?: Record<string, unknown>;
  /**
   * The call's idempotency key: a call with the key of one the run remembers
   * attaches to it and never runs twice. Default: the operation's request id.
   */
  key?: string;
  /** The session run's input if it is not running (its planner external). */
  start?: RunInput;
}

/** The outcome of the call operation (nexusserve.CallOutput). */
export interface CallOutput {
  run: string;
  call_id: string;
  tool: string;
  args_digest?: string;
  status: CallStatus;
  /** What the tool (or the memo, or a human in its place) answered. */
  result?: unknown;
  /** The run no longer keeps the result (a call attached to long after it ended). */
  result_dropped?: boolean;
  error?: string;
  note?: string;
  /** The call was proposed before under the same key, and did not run again. */
  attached?: boolean;
}

/** The input of the run operation (nexusserve.RunRequest). */
export interface RunRequest {
  /** The run's name: its workflow id is "nexus-" + id. */
  id: string;
  input: RunInput;
}

/** One record of a run's trace. */
export interface TraceRecord {
  seq: number;
  turn: number;
  call_id: string;
  tool: string;
  args?: unknown;
  status: string;
  result?: unknown;
  error?: string;
  attempts?: number;
  approver?: string;
  reason?: string;
  rule?: string;
  original_args?: unknown;
  via?: string;
  at: string;
}

/** What the run operation completes with (workflows.RunResult). */
export interface RunResult {
  status: RunStatus;
  answer?: string;
  error?: string;
  blocked_on?: { call_id: string; tool: string; call_args: unknown };
  trace: TraceRecord[];
}

/** The toolgate service: `call` proposes one tool call to a session run, `run` starts a run. */
export const toolgateService = nexus.service('toolgate', {
  call: nexus.operation<CallInput, CallOutput>(),
  run: nexus.operation<RunRequest, RunResult>(),
});

/**
 * The one argument toolgate gives the activity of a tool another worker hosts
 * (tool.Request): the same idempotency key on every attempt.
 */
export interface ToolRequest<A = Record<string, unknown>> {
  call_id: string;
  idempotency_key: string;
  args: A;
  /** Set when a human approved this call. */
  approval?: { approver: string; note?: string; kind: string; data?: unknown };
  /** The permit toolgate's worker signed for this activity of this call: check it before any effect (permit.ts). */
  permit?: string;
}
