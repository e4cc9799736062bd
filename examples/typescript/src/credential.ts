// The worker's Temporal credential. `toolgate dev` serves with an authorizer
// under which only a worker's token may poll a task queue (docs/threat-model.md):
// TOOLGATE_TOKEN_FILE names the token file it writes (.toolgate/auth/worker.token),
// sent as "authorization: Bearer …", as the Go workers' --token-file does.
// Without it the connection has no credential (any other Temporal, or a
// dev server's person role, which cannot poll).
import * as fs from 'node:fs';

export function workerMetadata(): Record<string, string> | undefined {
  const file = process.env.TOOLGATE_TOKEN_FILE;
  if (!file) {
    return undefined;
  }
  const token = fs.readFileSync(file, 'utf8').trim();
  if (!token) {
    throw new Error(`TOOLGATE_TOKEN_FILE=${file} is empty: want the worker token toolgate dev writes`);
  }
  return { authorization: `Bearer ${token}` };
}
