// A worker of a team whose tools are TypeScript: it hosts the tools
// examples/tools-remote.yaml declares, as activities on their task queue.
// toolgate gates them as its own — refund_ts is destructive there, so no
// refund reaches this worker without a human's approval of that exact call —
// and gives each attempt one argument, {call_id, idempotency_key, args,
// approval, permit}, the key the same on every attempt. Each tool checks the
// permit first (permit.ts: guard): anyone who may schedule an activity on this
// task queue could send it a request, and only toolgate's worker can sign one.
//
//   node lib/tools.js [DIR]
//
// Environment: TEMPORAL_ADDRESS (127.0.0.1:7233), TEMPORAL_NAMESPACE
// (default), TOOLS_TASK_QUEUE (toolgate-ts-tools), TOOLGATE_WORKER_PUB (the
// gate's worker public key file, DATA/worker.pub; default
// ../../.toolgate/worker.pub, toolgate dev's from the root of the clone):
// the keys whose permits this worker takes, REFUNDS_DIR (or DIR;
// default ./refunds): where the refunds are paid. REFUND_HANG_AFTER_PAYING=1
// makes the first attempt of each refund hang after paying, never answering,
// as a worker that dies between its side effect and its answer: kill it, start
// it again, and the retry pays nothing a second time.
import { createHash, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { NativeConnection, Worker } from '@temporalio/worker';
import { guardAll, readPublicKeys } from './permit';
import { ToolRequest } from './toolgate';
import { workerMetadata } from './credential';

const address = process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233';
const namespace = process.env.TEMPORAL_NAMESPACE || 'default';
const taskQueue = process.env.TOOLS_TASK_QUEUE || 'toolgate-ts-tools';
const refundsDir = path.resolve(process.env.REFUNDS_DIR || process.argv[2] || 'refunds');
const hangAfterPaying = process.env.REFUND_HANG_AFTER_PAYING === '1';
const workerPub = path.resolve(process.env.TOOLGATE_WORKER_PUB || path.join('..', '..', '.toolgate', 'worker.pub'));

/** The refunds paid: one file per idempotency key, standing for a payment provider that takes the key. */
const paidDir = path.join(refundsDir, 'paid');
/** Every attempt this worker was given, one JSON line each. */
const attemptsLog = path.join(refundsDir, 'attempts.jsonl');

interface RefundArgs {
  order: string;
  amount: number;
}

interface Payment {
  refund_id: string;
  order: string;
  amount: number;
  call_id: string;
  idempotency_key: string;
  approver?: string;
  paid_at: string;
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/**
 * Pays the refund once per idempotency key: the payment is published by
 * link(2), which fails if the key's file exists, so of two attempts (or two
 * workers) one pays and the other finds the payment made.
 */
function payOnce(req: ToolRequest<RefundArgs>): { payment: Payment; paidNow: boolean } {
  const file = path.join(paidDir, `${sha256(req.idempotency_key)}.json`);
  const payment: Payment = {
    refund_id: `R-${randomUUID().slice(0, 8)}`,
    order: req.args.order,
    amount: req.args.amount,
    call_id: req.call_id,
    idempotency_key: req.idempotency_key,
    approver: req.approval?.approver,
    paid_at: new Date().toISOString(),
  };
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(payment) + '\n');
  try {
    fs.linkSync(tmp, file); // the payment: made once, whole, or not at all
    return { payment, paidNow: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { payment: JSON.parse(fs.readFileSync(file, 'utf8')) as Payment, paidNow: false };
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

// README:begin
/** refund_ts: destructive (declared so in the tools file). Returns the refund made under the call's key. */
export async function refund_ts(req: ToolRequest<RefundArgs>): Promise<object> {
  const { attempt } = Context.current().info;
  fs.appendFileSync(attemptsLog, JSON.stringify({ call_id: req.call_id, idempotency_key: req.idempotency_key, attempt, pid: process.pid }) + '\n');
  const { order, amount } = req.args;
  if (amount > 1000) {
    // The tools file lists CardDeclined as non-retryable: the call ends in error at once.
    throw ApplicationFailure.create({ type: 'CardDeclined', message: `the card of order ${order} declines refunds over 1000` });
  }
  const { payment, paidNow } = payOnce(req);
  if (payment.order !== order || payment.amount !== amount) {
    throw ApplicationFailure.nonRetryable(`idempotency key ${req.idempotency_key} paid a refund of other arguments`, 'KeyReused');
  }
  console.log(`${req.call_id} attempt ${attempt}: refund ${payment.refund_id} of ${amount} for ${order} ${paidNow ? 'paid now' : 'was paid before'}`);
  if (hangAfterPaying && attempt === 1) {
    console.log(`${req.call_id}: paid, and hanging before answering (REFUND_HANG_AFTER_PAYING=1): kill this worker now`);
    await new Promise<never>(() => undefined);
  }
  return { refund_id: payment.refund_id, order, amount, status: 'paid', paid_at: payment.paid_at };
}
// README:end

/** order_status_ts: a read; toolgate memoizes its results. */
export async function order_status_ts(req: ToolRequest<{ order: string }>): Promise<object> {
  const statuses = ['processing', 'shipped', 'delivered'];
  const n = parseInt(sha256(req.args.order).slice(0, 8), 16);
  return { order: req.args.order, status: statuses[n % statuses.length] };
}

/** fx_rate_ts: a live read (memo: false in the tools file): asked again, it answers again. */
export async function fx_rate_ts(req: ToolRequest<{ pair: string }>): Promise<object> {
  const base = 1 + (parseInt(sha256(req.args.pair).slice(0, 4), 16) % 100) / 100;
  return { pair: req.args.pair, rate: Number((base + Math.random() / 1000).toFixed(5)), at: new Date().toISOString() };
}

async function main(): Promise<void> {
  // The gate's worker public key: each tool runs only with a permit it signed.
  const keys = readPublicKeys(workerPub);
  fs.mkdirSync(paidDir, { recursive: true });
  const connection = await NativeConnection.connect({ address, metadata: workerMetadata() });
  try {
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue,
      activities: guardAll({ keys }, { refund_ts, order_status_ts, fx_rate_ts }),
    });
    console.log(
      `tools worker polling task queue ${taskQueue} at ${address} (namespace ${namespace}); refunds paid under ${refundsDir}; ` +
        `permits checked against ${workerPub}`,
    );
    await worker.run(); // until SIGINT or SIGTERM
  } finally {
    await connection.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
