// The permit check of a TypeScript worker hosting tools for toolgate: what Go
// hosts get from permit.Guard (package permit), with nothing but node:crypto
// and the activity's context.
//
// Anyone who may schedule an activity on this worker's task queue can send
// its tools a request. toolgate's worker signs, for each activity of a call a
// gate let through, a permit (the request's "permit"): a JWS in compact form,
// alg EdDSA (Ed25519), protected header exactly
// {"alg":"EdDSA","typ":"toolgate-permit+jwt"}, whose claims name the run, the
// activity (id, type, task queue), the call (id, tool, argument digest,
// idempotency key) and the decision that let it through. guard() checks, before
// the tool has any effect:
//
// - the signature, against the worker public keys this worker trusts (the
//   gate's DATA/worker.pub: readPublicKeys);
// - that the claims name this activity as Temporal tells it
//   (Context.current().info: workflow and run id, activity id and type, task
//   queue) and this request (call id, idempotency key, approval, and the digest
//   of its arguments: argsDigest, tool/key.go's);
// - for a destructive tool (the permit's flag, which the gate's worker signed),
//   that a decision let it through, and that no other activity claimed the
//   permit: the claim starts the workflow toolgate-spent-permit-<jti>, REJECT_DUPLICATE,
//   with a request id that is the same on every attempt of this activity, so a
//   retry is answered with the same run and any other activity is refused.
//
// A request that fails a check is refused with a non-retryable ApplicationFailure
// of type PermitRefused saying why; the tool never sees it.
import { createHash, createPublicKey, KeyObject, verify } from 'node:crypto';
import * as fs from 'node:fs';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ToolRequest } from './toolgate';

/** The "typ" of every permit. */
export const PERMIT_TYPE = 'toolgate-permit+jwt';
/** The claims' version ("v") this module accepts. */
export const PERMIT_VERSION = 1;
/** The most bytes of a permit a verifier reads. */
export const PERMIT_MAX_BYTES = 8 << 10;
/** The ApplicationFailure type of a refused request (not retried). */
export const REFUSED = 'PermitRefused';
/** The ApplicationFailure type of a check that could not finish (its claim was not recorded yet): retried. */
export const REFUSED_RETRY = 'PermitRefusedRetry';
/** The claim's workflow: CLAIM_PREFIX + the permit's jti, of type MARKER_WORKFLOW. */
export const CLAIM_PREFIX = 'toolgate-spent-permit-';
export const MARKER_WORKFLOW = 'toolgate.start-token';
/** The claims' task queue: one no worker polls; the marker's id is what counts (Go: permit.ClaimQueue). */
export const CLAIM_QUEUE = 'toolgate-claims';
/** How long a claim's marker stays open before the server times it out; its id stays taken (Go: permit.ClaimTimeout). */
export const CLAIM_TIMEOUT_SECONDS = 10;

/** What a permit says (Go: permit.Claims). */
export interface PermitClaims {
  v: number;
  jti: string;
  kid: string;
  wid: string;
  rid: string;
  aid: string;
  type: string;
  tq: string;
  call: string;
  tool: string;
  digest: string;
  key: string;
  destructive: boolean;
  approver: string;
  kind: string;
  rules: string;
  iat: number;
}

/** Why a permit was refused. */
export type Refusal = 'missing' | 'malformed' | 'unknown-key' | 'bad-signature' | 'mismatch' | 'used';

/** A permit refused: guard() turns it into a non-retryable PermitRefused failure. */
export class PermitError extends Error {
  constructor(
    readonly reason: Refusal,
    message: string,
  ) {
    super(message);
    this.name = 'PermitError';
  }
}

/** The worker public keys a host trusts, by key id. */
export type TrustedKeys = Map<string, KeyObject>;

/** The Ed25519 SubjectPublicKeyInfo prefix of a raw 32-byte public key. */
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

function sha256hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A worker key's id: the first 16 hex digits of the SHA-256 of its 32 bytes. */
export function keyId(raw: Buffer): string {
  return sha256hex(raw).slice(0, 16);
}

/** Decodes unpadded base64url, refusing any other alphabet, padding or a non-canonical ending. */
function base64url(s: string, what: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) {
    throw new PermitError('malformed', `malformed permit: ${what}: not base64url`);
  }
  const b = Buffer.from(s, 'base64url');
  if (b.toString('base64url') !== s) {
    throw new PermitError('malformed', `malformed permit: ${what}: not canonical base64url`);
  }
  return b;
}

/**
 * Parses worker public keys, one a line in toolgate's text form
 * ("ed25519:" and 43 base64url characters, as DATA/worker.pub holds it);
 * blank lines and lines starting with # are skipped.
 */
export function parsePublicKeys(text: string, source = 'worker public keys'): TrustedKeys {
  const keys: TrustedKeys = new Map();
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const rest = line.startsWith('ed25519:') ? line.slice('ed25519:'.length) : undefined;
    const bytes = rest !== undefined && /^[A-Za-z0-9_-]{43}$/.test(rest) ? Buffer.from(rest, 'base64url') : undefined;
    if (!bytes || bytes.length !== 32 || bytes.toString('base64url') !== rest) {
      throw new Error(`${source}, line ${i + 1}: want ed25519: followed by 43 base64url characters (toolgate's DATA/worker.pub)`);
    }
    keys.set(keyId(bytes), createPublicKey({ key: Buffer.concat([SPKI_ED25519, bytes]), format: 'der', type: 'spki' }));
  }
  if (keys.size === 0) throw new Error(`${source}: no key in it`);
  return keys;
}

/** Reads the worker public keys in the file at path (parsePublicKeys): the gate's DATA/worker.pub. */
export function readPublicKeys(path: string): TrustedKeys {
  return parsePublicKeys(fs.readFileSync(path, 'utf8'), path);
}

const MAX_DEPTH = 128;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The canonical JSON of a JSON value (RFC 8785, as toolgate's tool/key.go
 * writes it): object members sorted by key as UTF-16 code units at every
 * depth, no whitespace, strings with minimal escaping, numbers as ECMAScript
 * prints them (1.0 is 1, 1e21 is 1e+21, -0 is 0). A value JSON cannot hold
 * (a number not finite, a lone surrogate, a function) throws.
 *
 * The value is what the SDK's JSON decoding made of the request; toolgate
 * sends the arguments already canonical, so they match byte for byte — except
 * a number a JavaScript number cannot hold exactly (more than 17 significant
 * digits, beyond ±1.8e308): those differ, and the permit is refused, as this
 * tool would see arguments other than the ones a gate let through.
 */
export function canonicalJSON(value: unknown): string {
  const out: string[] = [];
  write(value, 1, out);
  return out.join('');
}

function write(v: unknown, depth: number, out: string[]): void {
  switch (typeof v) {
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new Error(`canonical JSON: the number ${v} is not one JSON holds`);
      out.push(Object.is(v, -0) ? '0' : String(v));
      return;
    case 'string':
      if (LONE_SURROGATE.test(v)) throw new Error('canonical JSON: a lone surrogate in a string');
      out.push(JSON.stringify(v)); // escapes " \ and control characters only, as JCS does
      return;
    case 'object':
      break;
    default:
      throw new Error(`canonical JSON: a ${typeof v} is not a JSON value`);
  }
  if (v === null) {
    out.push('null');
    return;
  }
  if (depth > MAX_DEPTH) throw new Error(`canonical JSON: nesting deeper than ${MAX_DEPTH}`);
  if (Array.isArray(v)) {
    out.push('[');
    v.forEach((item, i) => {
      if (i > 0) out.push(',');
      write(item, depth + 1, out);
    });
    out.push(']');
    return;
  }
  const obj = v as Record<string, unknown>;
  // Array.prototype.sort compares strings by UTF-16 code units: JCS's order.
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  out.push('{');
  keys.forEach((k, i) => {
    if (i > 0) out.push(',');
    if (LONE_SURROGATE.test(k)) throw new Error('canonical JSON: a lone surrogate in a key');
    out.push(JSON.stringify(k), ':');
    write(obj[k], depth + 1, out);
  });
  out.push('}');
}

/** A call's argument digest (Go: tool.Digest): hex SHA-256 of tool + "::" + the canonical JSON of its arguments; none count as {}. */
export function argsDigest(tool: string, args: unknown): string {
  return sha256hex(tool + '::' + (args === undefined ? '{}' : canonicalJSON(args)));
}

const CLAIM_FIELDS: Record<keyof PermitClaims, 'string' | 'number' | 'boolean'> = {
  v: 'number',
  jti: 'string',
  kid: 'string',
  wid: 'string',
  rid: 'string',
  aid: 'string',
  type: 'string',
  tq: 'string',
  call: 'string',
  tool: 'string',
  digest: 'string',
  key: 'string',
  destructive: 'boolean',
  approver: 'string',
  kind: 'string',
  rules: 'string',
  iat: 'number',
};

function parseObject(raw: Buffer, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new PermitError('malformed', `malformed permit: ${what}: ${(err as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new PermitError('malformed', `malformed permit: ${what}: not a JSON object`);
  }
  return v as Record<string, unknown>;
}

function cut(s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, n) + '…';
}

/** Checks a permit's form and signature against keys and returns its claims; it checks nothing they say (checkBinding). */
export function verifyPermit(token: string | undefined, keys: TrustedKeys): PermitClaims {
  if (!token) {
    throw new PermitError(
      'missing',
      'no permit: this activity runs only for a call a toolgate gate let through, and this request carries no permit ' +
        '(scheduled by something other than a toolgate run of rules version 11 or later)',
    );
  }
  if (token.length > PERMIT_MAX_BYTES) {
    throw new PermitError('malformed', `malformed permit: ${token.length} bytes, over ${PERMIT_MAX_BYTES}`);
  }
  const parts = token.split('.');
  if (parts.length !== 3) throw new PermitError('malformed', 'malformed permit: not a JWS in compact form');
  const header = parseObject(base64url(parts[0], 'header'), 'header');
  if (Object.keys(header).length !== 2 || header.alg !== 'EdDSA' || header.typ !== PERMIT_TYPE) {
    throw new PermitError('malformed', `malformed permit: header must be exactly {"alg":"EdDSA","typ":"${PERMIT_TYPE}"}`);
  }
  const raw = parseObject(base64url(parts[1], 'payload'), 'claims');
  // Absent fields are empty, as Go decodes them.
  const claims: PermitClaims = {
    v: 0,
    jti: '',
    kid: '',
    wid: '',
    rid: '',
    aid: '',
    type: '',
    tq: '',
    call: '',
    tool: '',
    digest: '',
    key: '',
    destructive: false,
    approver: '',
    kind: '',
    rules: '',
    iat: 0,
  };
  for (const [k, val] of Object.entries(raw)) {
    const want = Object.hasOwn(CLAIM_FIELDS, k) ? CLAIM_FIELDS[k as keyof PermitClaims] : undefined;
    if (want === undefined) throw new PermitError('malformed', `malformed permit: claims: unknown field ${JSON.stringify(cut(k, 40))}`);
    if (typeof val !== want) throw new PermitError('malformed', `malformed permit: claims: ${k} is not a ${want}`);
    (claims as unknown as Record<string, unknown>)[k] = val;
  }
  if (claims.v !== PERMIT_VERSION) {
    throw new PermitError('malformed', `malformed permit: version ${claims.v}, want ${PERMIT_VERSION}`);
  }
  const pub = keys.get(claims.kid);
  if (!pub) {
    throw new PermitError(
      'unknown-key',
      `permit signed by an unknown key: key ${JSON.stringify(cut(claims.kid, 32))} is not one this worker trusts ` +
        "(give this worker the gate's worker public key, DATA/worker.pub)",
    );
  }
  const sig = base64url(parts[2], 'signature');
  if (!verify(null, Buffer.from(parts[0] + '.' + parts[1], 'ascii'), pub, sig)) {
    throw new PermitError('bad-signature', `bad permit signature: it does not verify with key ${claims.kid}`);
  }
  return claims;
}

/** What a permit must name: what Temporal says of the activity, and what it was sent. */
export interface Binding {
  workflowId: string;
  runId: string;
  activityId: string;
  activityType: string;
  taskQueue: string;
  callId: string;
  argsDigest: string;
  key: string;
  /** The request's approval's ("" for none). */
  approver: string;
  kind: string;
}

/** Compares the claims with b field by field; the error names the first that differs. */
export function checkBinding(c: PermitClaims, b: Binding): void {
  const fields: [string, string, string][] = [
    ['workflow', c.wid, b.workflowId],
    ['run', c.rid, b.runId],
    ['activity id', c.aid, b.activityId],
    ['activity type', c.type, b.activityType],
    ['task queue', c.tq, b.taskQueue],
    ['call id', c.call, b.callId],
    ['argument digest', c.digest, b.argsDigest],
    ['idempotency key', c.key, b.key],
    ['approver', c.approver, b.approver],
    ['decision kind', c.kind, b.kind],
  ];
  for (const [what, got, want] of fields) {
    if (got !== want) {
      throw new PermitError(
        'mismatch',
        `permit for another call: its ${what} is ${JSON.stringify(cut(got, 120))}, this activity's is ${JSON.stringify(cut(want, 120))}`,
      );
    }
  }
}

/** The decision kinds a destructive call's permit may name (Go: tool.DecisionKind). */
const APPROVED_KINDS = new Set(['gate', 'interrupt', 'policy', 'rule', 'grant']);

type StartRequest = Parameters<Client['workflowService']['startWorkflowExecution']>[0];
/** The marker's run timeout (protobufjs takes a number for an int64). */
const CLAIM_TIMEOUT = { seconds: CLAIM_TIMEOUT_SECONDS } as unknown as NonNullable<StartRequest['workflowRunTimeout']>;

/** Records a destructive permit's use once: the same claimant may claim it again, any other is refused ('used'). */
export type Claimer = (claims: PermitClaims, claimant: string) => Promise<void>;

/**
 * Claims permits on the activity's Temporal server: it starts the marker
 * workflow CLAIM_PREFIX + jti (type MARKER_WORKFLOW, REJECT_DUPLICATE, run
 * timeout CLAIM_TIMEOUT_SECONDS) with a request id of the claimant. The server answers a
 * start with the same request id with the run it started (this activity
 * again) and refuses any other. client: the activity's (Context.current().client)
 * unless given; namespace: the activity's; taskQueue: CLAIM_QUEUE.
 */
export function temporalClaimer(opts: { client?: Client; namespace?: string; taskQueue?: string } = {}): Claimer {
  return async (c, claimant) => {
    const client = opts.client ?? Context.current().client;
    const wid = CLAIM_PREFIX + c.jti;
    try {
      await client.workflowService.startWorkflowExecution({
        namespace: opts.namespace ?? Context.current().info.namespace,
        workflowId: wid,
        workflowType: { name: MARKER_WORKFLOW },
        taskQueue: { name: opts.taskQueue ?? CLAIM_QUEUE, kind: 1 /* TASK_QUEUE_KIND_NORMAL */ },
        workflowRunTimeout: CLAIM_TIMEOUT,
        identity: 'toolgate permit claim',
        requestId: sha256hex(claimant).slice(0, 32),
        workflowIdReusePolicy: 3 /* WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE */,
      });
    } catch (err) {
      if ((err as { code?: unknown }).code === 6 /* gRPC ALREADY_EXISTS: WorkflowExecutionAlreadyStarted */) {
        throw new PermitError(
          'used',
          `permit used already: permit ${c.jti} of ${c.wid}'s call ${c.call} was claimed by another activity (workflow ${wid} holds its use): a permit runs one activity`,
        );
      }
      throw new Error(`permit: claiming its use (workflow ${wid}): ${(err as Error).message}`);
    }
  };
}

/** A host's permit check: the keys it trusts and how destructive permits are claimed (default: temporalClaimer()). */
export interface PermitOptions {
  keys: TrustedKeys;
  claim?: Claimer;
}

/**
 * Checks req's permit for the activity running now (Context.current()):
 * signature, binding, and for a destructive tool a decision and its claim.
 * Throws PermitError when refused. A local activity needs none: it runs only in
 * the worker whose workflow task scheduled it.
 */
export async function checkPermit(opts: PermitOptions, req: ToolRequest<unknown>): Promise<PermitClaims | undefined> {
  const { info } = Context.current();
  if (info.isLocal) return undefined;
  const c = verifyPermit(req.permit, opts.keys);
  let digest: string;
  try {
    digest = argsDigest(c.tool, req.args);
  } catch (err) {
    throw new PermitError('mismatch', `permit for another call: the arguments do not canonicalize: ${(err as Error).message}`);
  }
  checkBinding(c, {
    workflowId: info.workflowExecution?.workflowId ?? '',
    runId: info.workflowExecution?.runId ?? '',
    activityId: info.activityId,
    activityType: info.activityType,
    taskQueue: info.taskQueue,
    callId: req.call_id,
    argsDigest: digest,
    key: req.idempotency_key,
    approver: req.approval?.approver ?? '',
    kind: req.approval?.kind ?? '',
  });
  if (!c.destructive) return c;
  if (!APPROVED_KINDS.has(c.kind) || c.approver === '') {
    throw new PermitError('mismatch', `permit for another call: ${c.tool} is destructive and its permit names no decision that let it through`);
  }
  // The claimant names this scheduled activity, the same on each attempt.
  const claimant = `${c.wid}/${c.rid}/${c.aid}@${info.scheduledTimestampMs}`;
  await (opts.claim ?? temporalClaimer())(c, claimant);
  return c;
}

/** err, of checkPermit, as the activity's failure: a refusal is final (PermitRefused), anything else retried. */
export function permitFailure(err: unknown): ApplicationFailure {
  if (err instanceof PermitError) return ApplicationFailure.nonRetryable(`refused: ${err.message}`, REFUSED);
  return ApplicationFailure.retryable((err as Error)?.message ?? String(err), REFUSED_RETRY);
}

/** fn, checking its request's permit first (checkPermit): a refused request fails with permitFailure's error and fn never sees it. */
export function guard<Req extends ToolRequest<any>, R>(opts: PermitOptions, fn: (req: Req) => Promise<R>): (req: Req) => Promise<R> {
  if (!opts.keys || opts.keys.size === 0) throw new Error("permit guard: the gate's worker public keys are needed (readPublicKeys)");
  return async (req: Req) => {
    try {
      await checkPermit(opts, req);
    } catch (err) {
      throw permitFailure(err);
    }
    return fn(req);
  };
}

/** Every activity of activities, guarded (guard). */
export function guardAll<T extends Record<string, (req: any) => Promise<unknown>>>(opts: PermitOptions, activities: T): T {
  const out: Record<string, (req: any) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries(activities)) out[name] = guard(opts, fn);
  return out as T;
}
