// The LangGraph.js side of toolgate's side-by-side bench (testsuite/bench,
// `toolgate-bench --langgraph`): the same loop as toolgate's AgentRun with the
// scripted planner, N sequential calls of an echo tool with distinct
// arguments, each through a gate node and then a tool node, with LangGraph's
// SQLite checkpointer on a file (one checkpoint after every step).
//
//   node bench.mjs --calls N [--variant echo|read] [--db FILE] [--durability async|sync|exit]
//
// Variants:
//   echo  gate → tool. The gate takes the scripted planner's next proposal and
//         checks it (a declared-destructive tool would wait for a human: none
//         is proposed here); the tool node runs echo and appends the trace.
//   read  gate → memo → tool: the path a toolgate read takes. The gate also
//         looks the call up in a memo kept in the graph's state (key: tool name
//         and canonical JSON of the arguments, at most 256 entries, as
//         toolgate's default); every call is a miss (distinct arguments), so
//         the tool runs and the result is stored in the memo.
// Both keep the last 1,000 trace records in state, as AgentRun does.
//
// Prints one JSON object on stdout (times in milliseconds). Per-call latency
// is the time from one gate step's start to the next one's (for the last call,
// to the end of the run): what toolgate's figure from event times measures
// (one call's ActivityTaskScheduled to the next one's).
import { mkdtempSync, rmSync, statSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { performance } from "node:perf_hooks";
import { createRequire } from "node:module";
import { Annotation, StateGraph, START, END } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

const TRACE_KEEP = 1000; // toolgate's workflows.TraceKeep
const MEMO_ENTRIES = 256; // toolgate's workflows.DefaultMemoEntries

function parseArgs(argv) {
  const o = { calls: 200, variant: "echo", db: "", durability: "async" };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    switch (k) {
      case "--calls": o.calls = Number.parseInt(v, 10); i++; break;
      case "--variant": o.variant = v; i++; break;
      case "--db": o.db = v; i++; break;
      case "--durability": o.durability = v; i++; break;
      default: throw new Error(`unknown argument ${k}`);
    }
  }
  if (!(o.calls > 0)) throw new Error("--calls wants a positive number");
  if (!["echo", "read"].includes(o.variant)) throw new Error("--variant wants echo or read");
  if (!["async", "sync", "exit"].includes(o.durability)) throw new Error("--durability wants async, sync or exit");
  return o;
}

// canonical is JSON with object keys sorted at every depth (toolgate's tool.Key).
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

const destructive = new Set(["write"]); // declared where registered, never guessed
const tools = { echo: async (args) => args };

const State = Annotation.Root({
  step: Annotation({ reducer: (_, b) => b, default: () => 0 }),
  pending: Annotation({ reducer: (_, b) => b, default: () => null }),
  memo: Annotation({ reducer: (_, b) => b, default: () => ({}) }),
  trace: Annotation({
    reducer: (a, b) => {
      const all = a.concat(b);
      return all.length > TRACE_KEEP ? all.slice(all.length - TRACE_KEEP) : all;
    },
    default: () => [],
  }),
});

function buildGraph(o, stamps) {
  const plan = (step) => ({ id: `c-${step + 1}`, tool: "echo", args: { n: step + 1 } });
  const gate = async (s) => {
    stamps.push(performance.now());
    const call = plan(s.step);
    if (destructive.has(call.tool)) throw new Error("a destructive call would wait for a human here");
    if (o.variant === "read") {
      const key = `${call.tool}::${canonical(call.args)}`;
      if (Object.hasOwn(s.memo, key)) {
        return { step: s.step + 1, pending: null, trace: [{ call_id: call.id, tool: call.tool, status: "cache_hit", args: call.args, result: s.memo[key] }] };
      }
      return { pending: { ...call, key } };
    }
    return { pending: call };
  };
  const tool = async (s) => {
    const call = s.pending;
    const result = await tools[call.tool](call.args);
    const out = { step: s.step + 1, pending: null, trace: [{ call_id: call.id, tool: call.tool, status: "ok", args: call.args, result }] };
    if (o.variant === "read") {
      const memo = { ...s.memo, [call.key]: result };
      const keys = Object.keys(memo);
      for (let i = 0; i < keys.length - MEMO_ENTRIES; i++) delete memo[keys[i]];
      out.memo = memo;
    }
    return out;
  };
  return new StateGraph(State)
    .addNode("gate", gate)
    .addNode("tool", tool)
    .addEdge(START, "gate")
    .addConditionalEdges("gate", (s) => (s.pending ? "tool" : s.step < o.calls ? "gate" : END), ["tool", "gate", END])
    .addConditionalEdges("tool", (s) => (s.step < o.calls ? "gate" : END), ["gate", END]);
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99) };
}

function version(require, pkg) {
  try {
    return JSON.parse(readFileSync(join(dirname(require.resolve(`${pkg}/package.json`)), "package.json"), "utf8")).version;
  } catch {
    return "?";
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const tmp = o.db ? "" : mkdtempSync(join(tmpdir(), "toolgate-bench-langgraph-"));
  const dbPath = o.db || join(tmp, "checkpoints.db");
  const saver = SqliteSaver.fromConnString(dbPath);
  const thread = { configurable: { thread_id: `bench-${o.variant}-${o.calls}-${Date.now()}` } };

  const stamps = [];
  const run = buildGraph(o, stamps).compile({ checkpointer: saver });
  const start = performance.now();
  const final = await run.invoke({ step: 0 }, { ...thread, recursionLimit: 2 * o.calls + 10, durability: o.durability });
  const end = performance.now();

  if (final.step !== o.calls) throw new Error(`made ${final.step} of ${o.calls} calls`);
  const last = final.trace[final.trace.length - 1];
  if (!last || last.call_id !== `c-${o.calls}`) throw new Error(`the last trace record is not c-${o.calls}`);
  const perCall = stamps.map((t, i) => (i + 1 < stamps.length ? stamps[i + 1] : end) - t);
  const n = Math.min(50, Math.floor(perCall.length / 2)) || perCall.length;
  const row = saver.db.prepare("SELECT count(*) AS n, coalesce(sum(length(checkpoint)), 0) AS bytes, coalesce(max(length(checkpoint)), 0) AS max FROM checkpoints WHERE thread_id = ?")
    .get(thread.configurable.thread_id);
  const writes = saver.db.prepare("SELECT count(*) AS n FROM writes WHERE thread_id = ?").get(thread.configurable.thread_id);
  saver.db.close();
  const require = createRequire(import.meta.url);
  const seconds = (end - start) / 1000;
  const all = stats(perCall);
  const out = {
    framework: "langgraph.js",
    langgraph: version(require, "@langchain/langgraph"),
    checkpointer: `@langchain/langgraph-checkpoint-sqlite ${version(require, "@langchain/langgraph-checkpoint-sqlite")}`,
    node: process.version,
    variant: o.variant,
    durability: o.durability,
    calls: o.calls,
    seconds,
    calls_per_second: o.calls / seconds,
    p50_ms: all.p50,
    p99_ms: all.p99,
    first_p50_ms: stats(perCall.slice(0, n)).p50,
    last_p50_ms: stats(perCall.slice(perCall.length - n)).p50,
    window: n,
    checkpoints: row.n,
    writes: writes.n,
    checkpoint_bytes: row.bytes,
    max_checkpoint_bytes: row.max,
    db_bytes: statSync(dbPath).size,
    trace: final.trace.length,
  };
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err) => {
  process.stderr.write(`langgraph bench: ${err?.stack ?? err}\n`);
  process.exit(1);
});
