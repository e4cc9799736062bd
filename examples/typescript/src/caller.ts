// The caller's side: a worker that runs the workflows of workflows.ts on its
// own task queue, and a starter for them.
//
//   node lib/caller.js worker                  the worker (until Ctrl-C)
//   node lib/caller.js agent [RUN]             start ticketAgent, print its outputs
//   node lib/caller.js cancel-demo [RUN]       start cancellableClose, cancel it once the close waits, print what happened
//   node lib/caller.js call TOOL ARGS [RUN]    one call through the gate (args: a JSON object)
//
// Environment: TEMPORAL_ADDRESS (127.0.0.1:7233), TEMPORAL_NAMESPACE
// (default), CALLER_TASK_QUEUE (toolgate-ts-agents).
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { cancellableClose, callOnce, cancelSignal, ticketAgent } from './workflows';
import { workerMetadata } from './credential';

const address = process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233';
const namespace = process.env.TEMPORAL_NAMESPACE || 'default';
const taskQueue = process.env.CALLER_TASK_QUEUE || 'toolgate-ts-agents';

async function runWorker(): Promise<void> {
  const connection = await NativeConnection.connect({ address, metadata: workerMetadata() });
  try {
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue,
      workflowsPath: require.resolve('./workflows'),
    });
    console.log(`caller worker polling task queue ${taskQueue} at ${address} (namespace ${namespace})`);
    await worker.run(); // until SIGINT or SIGTERM
  } finally {
    await connection.close();
  }
}

async function client(): Promise<Client> {
  return new Client({ connection: await Connection.connect({ address }), namespace });
}

/** A run name of its own for each start: a session run keeps its memo (and its calls' keys) while it lives. */
function runName(arg: string | undefined, prefix: string): string {
  return arg || `${prefix}-${Date.now().toString(36)}`;
}

async function agent(run: string): Promise<void> {
  const c = await client();
  const handle = await c.workflow.start(ticketAgent, { taskQueue, workflowId: `caller-${run}`, args: [run] });
  console.log(`workflow ${handle.workflowId} started: its calls go to toolgate's run nexus-${run}`);
  console.log(`the close waits for your approval: toolgate approve nexus-${run} c-3 --as you   (or the inbox)`);
  for (const out of await handle.result()) {
    console.log(`${out.call_id}  ${out.tool}  ${out.status}  ${JSON.stringify(out.result ?? out.error ?? null)}`);
  }
}

async function cancelDemo(run: string): Promise<void> {
  const c = await client();
  const handle = await c.workflow.start(cancellableClose, { taskQueue, workflowId: `caller-${run}`, args: [run] });
  console.log(`workflow ${handle.workflowId} started: the close waits at the gate of nexus-${run}`);
  const session = c.workflow.getHandle(`nexus-${run}`);
  for (;;) {
    // toolgate's query "next": what the run waits to do next.
    const next = await session.query<string[]>('next').catch(() => [] as string[]);
    if (next.includes('gate:close_ticket')) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log('the close waits for a human; cancelling the workflow\'s operation');
  await handle.signal(cancelSignal);
  console.log(JSON.stringify(await handle.result(), null, 2));
  console.log(`toolgate trace nexus-${run} shows the call cancelled by (caller)`);
}

async function call(toolName: string, args: string, run: string): Promise<void> {
  const c = await client();
  const out = await c.workflow.execute(callOnce, {
    taskQueue,
    workflowId: `caller-${run}-${Date.now().toString(36)}`,
    args: [{ run, tool: toolName, args: JSON.parse(args) }],
  });
  console.log(JSON.stringify(out, null, 2));
}

async function main(argv: string[]): Promise<void> {
  const [mode = 'worker', ...rest] = argv;
  switch (mode) {
    case 'worker':
      return runWorker();
    case 'agent':
      return agent(runName(rest[0], 'ts-agent'));
    case 'cancel-demo':
      return cancelDemo(runName(rest[0], 'ts-close'));
    case 'call':
      if (rest.length < 2) throw new Error('usage: caller.js call TOOL ARGS_JSON [RUN]');
      return call(rest[0], rest[1], rest[2] || 'ts-calls');
    default:
      throw new Error(`unknown mode ${mode}: want worker, agent, cancel-demo or call`);
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
