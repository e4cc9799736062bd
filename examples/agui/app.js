// toolgate's AG-UI example: a chat with the demo desk. No dependencies, no
// build step. It speaks AG-UI by hand — one POST of a RunAgentInput to
// ./agui per message or answer, the text/event-stream read with fetch and a
// ReadableStream — and keeps the thread's AG-UI messages itself, sending them
// with every request, as an AG-UI client does. Every string from the server
// is inserted with textContent, never as HTML.
'use strict';
(() => {
  const ENDPOINT = './agui';

  const $ = (id) => document.getElementById(id);
  const log = $('log'), input = $('message'), send = $('send'), status = $('status'), composer = $('composer');

  // uuid is crypto.randomUUID where the page is a secure context (https,
  // loopback), else a v4 UUID from crypto.getRandomValues.
  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  const threadId = uuid(); // one thread (one toolgate run) per page load
  let messages = []; // the thread's AG-UI messages, sent with every POST
  let open = []; // the interrupts of the last RUN_FINISHED, until answered
  let answers = new Map(); // interrupt id -> resume entry
  let busy = false;
  const toolViews = new Map(); // toolCallId -> the element showing its arguments
  const textViews = new Map(); // messageId -> the .assistant element

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function append(node) {
    log.appendChild(node);
    node.scrollIntoView({ block: 'nearest' });
    return node;
  }

  function showError(text) { append(el('div', 'error', text)); }

  function refresh() {
    const waiting = open.length > 0;
    send.disabled = busy || waiting;
    input.disabled = busy || waiting;
    if (busy) status.textContent = 'running…';
    else if (waiting) status.textContent = `${open.length - answers.size} of ${open.length} call(s) wait for your answer`;
  }

  // --- The thread's messages, kept as @ag-ui/client keeps them -----------

  function findCall(id) {
    for (const m of messages) for (const c of m.toolCalls || []) if (c.id === id) return c;
    return undefined;
  }

  function assistantFor(parentId, toolCallId) {
    const id = parentId || toolCallId;
    let m = messages.find((x) => x.id === id);
    if (!m || m.role !== 'assistant') {
      m = { id: m ? toolCallId : id, role: 'assistant', toolCalls: [] };
      messages.push(m);
    }
    if (!m.toolCalls) m.toolCalls = [];
    return m;
  }

  function addToolResult(ev) {
    const msg = { id: ev.messageId, role: 'tool', toolCallId: ev.toolCallId, content: ev.content };
    const at = messages.findIndex((m) => m.role === 'assistant' && (m.toolCalls || []).some((c) => c.id === ev.toolCallId));
    if (at < 0) { messages.push(msg); return; }
    let i = at + 1;
    while (i < messages.length && messages[i].role === 'tool') i++;
    messages.splice(i, 0, msg);
  }

  function showState(s) {
    if (!s || typeof s !== 'object') return;
    const parts = [`status ${s.status}`];
    if (s.turn !== undefined) parts.push(`turn ${s.turn}`);
    if (s.calls !== undefined) parts.push(`${s.calls} call(s)`);
    if (s.memo) parts.push(`memo ${s.memo.hits || 0} hit(s), ${s.memo.misses || 0} miss(es)`);
    status.textContent = parts.join(' · ');
  }

  // apply renders one AG-UI event and folds it into the messages.
  function apply(ev) {
    switch (ev.type) {
      case 'RUN_STARTED':
        status.textContent = 'running…';
        break;
      case 'TOOL_CALL_START': {
        if (!findCall(ev.toolCallId)) {
          assistantFor(ev.parentMessageId, ev.toolCallId).toolCalls.push(
            { id: ev.toolCallId, type: 'function', function: { name: ev.toolCallName, arguments: '' } });
        }
        const v = el('div', 'tool-call');
        v.dataset.toolCallId = ev.toolCallId;
        const args = el('span', 'args', '');
        v.append(el('span', 'name', ev.toolCallName), ' ', args, el('span', 'id', `  (${ev.toolCallId})`));
        toolViews.set(ev.toolCallId, args);
        append(v);
        break;
      }
      case 'TOOL_CALL_ARGS': {
        const c = findCall(ev.toolCallId);
        if (c) c.function.arguments += ev.delta;
        const v = toolViews.get(ev.toolCallId);
        if (v) v.textContent += ev.delta;
        break;
      }
      case 'TOOL_CALL_RESULT': {
        addToolResult(ev);
        const v = el('div', 'tool-result', `${ev.toolCallId} → ${ev.content}`);
        v.dataset.toolCallId = ev.toolCallId;
        append(v);
        break;
      }
      case 'TEXT_MESSAGE_START':
        if (!messages.some((m) => m.id === ev.messageId)) messages.push({ id: ev.messageId, role: ev.role || 'assistant', content: '' });
        textViews.set(ev.messageId, append(el('div', 'assistant', '')));
        break;
      case 'TEXT_MESSAGE_CONTENT': {
        const m = messages.find((x) => x.id === ev.messageId);
        if (m) m.content = (m.content || '') + ev.delta;
        const v = textViews.get(ev.messageId);
        if (v) v.textContent += ev.delta;
        break;
      }
      case 'STATE_SNAPSHOT':
        showState(ev.snapshot);
        break;
      case 'MESSAGES_SNAPSHOT':
        // The server's word on the thread: the messages sent plus this run's.
        if (Array.isArray(ev.messages)) messages = JSON.parse(JSON.stringify(ev.messages));
        break;
      case 'RUN_ERROR':
        showError(`refused: ${ev.message}${ev.code ? ` (${ev.code})` : ''}`);
        break;
      default: // TOOL_CALL_END, TEXT_MESSAGE_END, RUN_FINISHED, STEP_*, CUSTOM, RAW: nothing to draw
    }
  }

  // --- The stream: text/event-stream, read by hand ------------------------

  // readEvents calls onEvent with each event's JSON: events are separated by
  // a blank line, and an event's data is its data: lines joined by newlines.
  async function readEvents(body, onEvent) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    const dispatch = (block) => {
      const data = [];
      for (const line of block.split(/\r\n|\n|\r/)) {
        if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length > 0) onEvent(JSON.parse(data.join('\n')));
    };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        for (let m = buf.match(/\r\n\r\n|\n\n|\r\r/); m; m = buf.match(/\r\n\r\n|\n\n|\r\r/)) {
          dispatch(buf.slice(0, m.index));
          buf = buf.slice(m.index + m[0].length);
        }
      }
    } catch (err) {
      reader.cancel().catch(() => {});
      throw err;
    }
    // A last event without its blank line is incomplete: dropped, as EventSource does.
  }

  // run posts one RunAgentInput (the thread's messages, and extra: a resume)
  // and applies the stream. It resolves to the run's outcome, or null when
  // the request was refused or the stream ended early.
  async function run(extra) {
    busy = true;
    refresh();
    let outcome = null, refused = false;
    try {
      const body = { threadId, runId: uuid(), state: {}, messages, tools: [], context: [], forwardedProps: {}, ...extra };
      const res = await fetch(ENDPOINT, {
        method: 'POST', credentials: 'same-origin', cache: 'no-store',
        headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify(body),
      });
      if (!res.ok) {
        showError(`HTTP ${res.status}: ${(await res.text()).trim()}`);
        return null;
      }
      await readEvents(res.body, (ev) => {
        if (ev.type === 'RUN_FINISHED') outcome = ev.outcome || { type: 'success' };
        if (ev.type === 'RUN_ERROR') refused = true;
        apply(ev);
      });
      if (!outcome && !refused) showError('the stream ended before the run finished: press Send with no message to pick it up where it is');
    } catch (err) {
      showError(`request failed: ${err && err.message ? err.message : err}`);
      outcome = null;
    } finally {
      busy = false;
      refresh();
    }
    if (outcome && outcome.type === 'interrupt') showInterrupts(outcome.interrupts || []);
    else if (outcome) status.textContent = status.textContent.replace('running…', 'done');
    return outcome;
  }

  // --- Interrupts: one card each, one resume when all are answered ------

  function argsText(it) {
    const md = it.metadata || {};
    if (typeof md.call_args === 'string') return md.call_args;
    if (md.call_args !== undefined) return JSON.stringify(md.call_args, null, 2);
    const c = it.toolCallId ? findCall(it.toolCallId) : undefined;
    return c ? c.function.arguments : '';
  }

  function showInterrupts(list) {
    open = list.slice();
    answers = new Map();
    for (const it of open) append(card(it));
    refresh();
  }

  function card(it) {
    const md = it.metadata || {};
    const call = it.toolCallId ? findCall(it.toolCallId) : undefined;
    const c = el('div', 'interrupt');
    c.dataset.interruptId = it.id;
    const head = el('div', 'head');
    head.append(el('span', 'tool', md.tool || (call && call.function.name) || 'call'), ' ', el('span', 'call', it.toolCallId || ''));
    const meta = [`expires ${it.expiresAt || 'never'}`];
    if (md.kind) meta.push(`kind ${md.kind}`);
    if (md.rule) meta.push(`rule ${md.rule}`);
    if (md.args_digest) meta.push(`args_digest ${md.args_digest}`);
    const args = argsText(it);

    const approve = el('button', 'approve', 'Approve');
    const reason = el('input', 'reason');
    reason.placeholder = 'reason (sent with a rejection)';
    const reject = el('button', 'reject', 'Reject');
    const edited = el('textarea', 'edited-args');
    edited.rows = 3;
    edited.spellcheck = false;
    edited.value = args;
    const edit = el('button', 'edit', 'Approve with these arguments');
    const said = el('p', 'answer', '');
    for (const b of [approve, reject, edit]) b.type = 'button';

    approve.addEventListener('click', () => answer(it, c, said, { approved: true }, 'approved'));
    reject.addEventListener('click', () => {
      const why = reason.value.trim();
      answer(it, c, said, why ? { approved: false, reason: why } : { approved: false }, why ? `rejected: ${why}` : 'rejected');
    });
    edit.addEventListener('click', () => {
      let v;
      try {
        v = JSON.parse(edited.value);
      } catch (err) {
        return problem(said, `the edited arguments are not JSON: ${err.message}`);
      }
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return problem(said, 'the edited arguments must be a JSON object');
      let same = false;
      try {
        same = canonical(v) === canonical(JSON.parse(args));
      } catch (err) { /* the shown arguments are not JSON: an edit */ }
      // Unchanged arguments are an approval: the run refuses an "edit" to the call's own arguments.
      if (same) answer(it, c, said, { approved: true }, 'approved (arguments unchanged)');
      else answer(it, c, said, { approved: true, editedArgs: v }, 'approved with edited arguments');
    });

    const r1 = el('div', 'row'), r2 = el('div', 'row'), r3 = el('div', 'row');
    r1.append(approve);
    r2.append(reason, reject);
    r3.append(edit);
    c.append(head, el('div', 'message', it.message || it.reason || ''), el('pre', 'args', args),
      el('p', 'meta', meta.join(' · ')), r1, r2, edited, r3, said);
    return c;
  }

  // canonical is JSON text with object keys sorted, to compare two values.
  function canonical(v) {
    if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
    if (v !== null && typeof v === 'object') {
      return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
    }
    return JSON.stringify(v);
  }

  function problem(said, text) {
    said.textContent = text;
    said.classList.add('bad');
  }

  function answer(it, c, said, payload, label) {
    if (!open.some((x) => x.id === it.id) || answers.has(it.id)) return;
    let entry = { interruptId: it.id, status: 'resolved', payload };
    if (it.expiresAt && Date.parse(it.expiresAt) <= Date.now()) {
      if (payload.approved) return problem(said, `expired at ${it.expiresAt}: it can only be rejected (cancelled) now`);
      entry = { interruptId: it.id, status: 'cancelled' };
      label = 'cancelled (expired)';
    }
    answers.set(it.id, entry);
    c.classList.add('answered');
    for (const x of c.querySelectorAll('button, input, textarea')) x.disabled = true;
    said.classList.remove('bad');
    said.textContent = `your answer: ${label}`;
    refresh();
    if (answers.size < open.length) return;
    const resume = open.map((x) => answers.get(x.id));
    open = [];
    answers = new Map();
    run({ resume }).then((outcome) => {
      if (!outcome) showError('the answers were not taken: press Send with no message to load what still waits');
    });
  }

  // --- The composer -----------------------------------------------------

  composer.addEventListener('submit', (e) => {
    e.preventDefault();
    if (busy || open.length > 0) return;
    const text = input.value.trim();
    if (text) {
      messages.push({ id: `user-${uuid()}`, role: 'user', content: text });
      append(el('div', 'user', text));
      input.value = '';
    }
    // No text: a reconnect, which streams the run from where it is.
    run({});
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });

  $('thread').textContent = threadId;
  window.toolgateChat = Object.freeze({ threadId, messages: () => JSON.parse(JSON.stringify(messages)) });
  input.focus();
})();
