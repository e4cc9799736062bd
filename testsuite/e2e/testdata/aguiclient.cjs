// aguiclient.cjs is an AG-UI client this project did not write: HttpAgent of
// @ag-ui/client 1.0.0 (installed by .ci/run outside the clone; the npm prefix
// directory holding its node_modules in TOOLGATE_AGUI_NODE_CLIENT). The e2e
// suite drives it with a script, as JSON on argv[2] or on stdin:
//
//   {"url": "http://127.0.0.1:PORT/agui", "threadId": "t-1",
//    "messages": [...],                      // optional: the thread so far (another process's)
//    "headers": {"Origin": "..."},           // optional: sent with every request
//    "steps": [
//      {"message": "close the login ticket"},                         // a user message, then runAgent
//      {"resume": [{"interruptId": "#0", "status": "resolved", "payload": {"approved": true}}]},
//      {}                                                             // no message, no resume: a reconnect
//    ]}
//
// Each step is one agent.runAgent({resume}) on one HttpAgent, whose messages
// accumulate across steps as the client keeps them. An interruptId "#N" is
// the N-th interrupt (from 0) of the latest RUN_FINISHED with an interrupt outcome.
// (HttpAgent itself refuses to run while the interrupts of its own last run
// are not all answered; an agent started with the thread's messages has none,
// so a resume it sends reaches the server, whose answer is then what counts.)
//
// It prints one JSON line per step: {"events": [every event, as applied],
// "outcome": RUN_FINISHED's outcome, or {"type": "error", "message", "code"}
// for RUN_ERROR, or null, "error": what runAgent threw (the client's event
// verification, an HTTP error), "messages": agent.messages after the step,
// "pendingInterrupts": agent.pendingInterrupts}. It exits 1 if any step has
// an error, 2 if the script itself is wrong.
'use strict';
const { createRequire } = require('module');
const fs = require('fs');
const path = require('path');

function fatal(msg) {
  console.log(JSON.stringify({ error: msg }));
  process.exit(2);
}

const dir = process.env.TOOLGATE_AGUI_NODE_CLIENT;
if (!dir) fatal('TOOLGATE_AGUI_NODE_CLIENT is not set');
const need = createRequire(path.join(dir, 'node_modules', 'x.js'));
const { HttpAgent } = need('@ag-ui/client');

function resolveResume(resume, interrupts) {
  return resume.map((entry) => {
    const m = /^#(\d+)$/.exec(entry.interruptId || '');
    if (!m) return entry;
    const it = interrupts[Number(m[1])];
    if (!it) throw new Error(`resume names ${entry.interruptId}, but the latest interrupt outcome has ${interrupts.length} interrupt(s)`);
    return { ...entry, interruptId: it.id };
  });
}

async function main() {
  const raw = process.argv[2] !== undefined ? process.argv[2] : fs.readFileSync(0, 'utf8');
  let script;
  try {
    script = JSON.parse(raw);
  } catch (err) {
    fatal(`the script is not JSON: ${err.message}`);
  }
  if (!script.url || !Array.isArray(script.steps)) fatal('the script needs url and steps');
  const agent = new HttpAgent({ url: script.url, threadId: script.threadId, headers: script.headers || {},
    initialMessages: script.messages || [] });
  let interrupts = [];
  let failed = false;
  for (const [i, step] of script.steps.entries()) {
    const events = [];
    let outcome = null;
    const line = {};
    try {
      if (typeof step.message === 'string') {
        agent.addMessage({ id: `user-${i}-${Date.now().toString(36)}`, role: 'user', content: step.message });
      }
      const params = {};
      if (step.runId) params.runId = step.runId;
      if (step.resume !== undefined) params.resume = resolveResume(step.resume, interrupts);
      await agent.runAgent(params, {
        onEvent: ({ event }) => {
          events.push(JSON.parse(JSON.stringify(event)));
          if (event.type === 'RUN_FINISHED') {
            outcome = event.outcome || { type: 'success' };
            if (outcome.type === 'interrupt') interrupts = outcome.interrupts || [];
          } else if (event.type === 'RUN_ERROR') {
            outcome = { type: 'error', message: event.message, code: event.code };
          }
        },
      });
    } catch (err) {
      line.error = String((err && err.message) || err);
      failed = true;
    }
    Object.assign(line, { events, outcome, messages: agent.messages, pendingInterrupts: agent.pendingInterrupts });
    console.log(JSON.stringify(line));
  }
  return failed;
}

main().then((failed) => process.exit(failed ? 1 : 0), (err) => fatal(String((err && err.stack) || err)));
