// Workflows of a team whose agents are TypeScript: every tool call goes
// through toolgate's gate, as one Nexus operation that completes when the
// call has ended — after a human's approval, if the tool is destructive,
// however long that takes and whichever worker is running by then.
//
// Workflow code: bundled by the worker and run deterministically, so it
// imports only @temporalio/workflow and the service definition.
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  createNexusServiceClient,
  defineSignal,
  isCancellation,
  NexusOperationCancellationType,
  setHandler,
} from '@temporalio/workflow';
import { CallInput, CallOutput, ENDPOINT, toolgateService } from './toolgate';

// README:begin
function toolgate() {
  return createNexusServiceClient({ endpoint: ENDPOINT, service: toolgateService });
}

/** The statuses of a call that produced a result. */
const answered = new Set(['ok', 'cache_hit', 'responded']);

/**
 * An agent's three calls on the demo support desk, in session run
 * "nexus-<run>": the same search twice (the second is answered from the run's
 * memo: the tool runs once), then the close, which is destructive and so
 * waits for a human's approval of that exact call. The close has a key of
 * the agent's: proposed again under it (a workflow reset, a second agent
 * doing the same), it attaches to the first and never runs twice.
 */
export async function ticketAgent(run: string): Promise<CallOutput[]> {
  const tg = toolgate();
  const search: CallInput = { run, tool: 'search_tickets', args: { query: 'login' } };
  const outs: CallOutput[] = [];
  for (const call of [search, search]) {
    const out = await tg.executeOperation('call', call);
    if (!answered.has(out.status)) {
      throw ApplicationFailure.nonRetryable(`${out.call_id} ${out.tool}: ${out.status} ${out.error ?? ''}`, 'CallFailed', outs);
    }
    outs.push(out);
  }
  outs.push(await tg.executeOperation('call', { run, tool: 'close_ticket', args: { ticket_id: 'TKT-3' }, key: `${run}:close:TKT-3` }));
  return outs;
}
// README:end

/** One call through the gate, whatever the tool (`npm run call -- TOOL ARGS`). */
export async function callOnce(input: CallInput): Promise<CallOutput> {
  return await toolgate().executeOperation('call', input);
}

/** Sent to cancellableClose: give up on the close. */
export const cancelSignal = defineSignal('cancel');

/** What cancellableClose saw. */
export interface CloseOutcome {
  /** The operation ended cancelled: the close still waited for a human, and toolgate withdrew it. */
  withdrawn: boolean;
  /** The call's outcome, when it ended before the cancel could withdraw it. */
  output?: CallOutput;
  /** The failure the cancelled operation reported. */
  error?: string;
}

/**
 * Proposes the close in a cancellation scope and waits for the signal
 * "cancel" (or the call's end). On the signal it cancels the scope: the
 * Nexus operation is cancelled, and toolgate withdraws the call if it still
 * waits for a human (the run's trace shows it cancelled by "(caller)"; an
 * approval after that is refused). A call already approved and running is
 * not undone: its outcome comes back instead.
 */
export async function cancellableClose(run: string): Promise<CloseOutcome> {
  let cancelRequested = false;
  setHandler(cancelSignal, () => {
    cancelRequested = true;
  });
  const scope = new CancellationScope();
  let done = false;
  const outcome: Promise<CloseOutcome> = scope
    .run(() =>
      toolgate().executeOperation(
        'call',
        { run, tool: 'close_ticket', args: { ticket_id: 'TKT-3' } },
        // The default, said here because it matters: the operation fails
        // cancelled only once toolgate's side has ended cancelled — the call
        // withdrawn. ABANDON or TRY_CANCEL would report a cancellation
        // toolgate may never have received, while the call still waits.
        { cancellationType: NexusOperationCancellationType.WAIT_CANCELLATION_COMPLETED },
      ),
    )
    .then(
      (output): CloseOutcome => ({ withdrawn: false, output }),
      (err): CloseOutcome => {
        if (isCancellation(err)) {
          return { withdrawn: true, error: describe(err) };
        }
        throw err;
      },
    )
    .finally(() => {
      done = true;
    });
  outcome.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
  await condition(() => cancelRequested || done);
  if (!done) {
    scope.cancel();
  }
  return await outcome;
}

/** An error and its causes, one line. */
function describe(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 5; e = (e as { cause?: unknown }).cause) {
    parts.push(`${e.name}: ${e.message}`);
  }
  return parts.join(' <- ');
}
