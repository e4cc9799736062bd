// toolgate approvals inbox. No dependencies, no build step. Every string that
// comes from a run or a tool is inserted with textContent, never as HTML.
'use strict';
(() => {
  const enc = new TextEncoder();
  const POLL_MS = 1500;
  const VALID_S = 600; // a signed decision is valid for 10 minutes, as the CLI's

  // --- Tokens: the same form as signed.Sign (sign.js, loaded first) --------

  if (!window.toolgateSign) throw new Error('sign.js did not load: the inbox signs nothing without it');
  const { canonical, parseJSON, canonicalTree, canonicalText, digest, claimsJSON, signToken, importKey, hexOf } = window.toolgateSign;

  // Control and bidi characters (C0 and C1 controls, U+061C, U+200E/F,
  // U+202A–U+202E, U+2066–U+2069) in text from a run are shown as visible
  // marks, never applied: an override could make the page show other text
  // than the run holds.
  const SPECIAL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const BIDI = { 0x61c: 'ALM', 0x200e: 'LRM', 0x200f: 'RLM', 0x202a: 'LRE', 0x202b: 'RLE', 0x202c: 'PDF', 0x202d: 'LRO',
    0x202e: 'RLO', 0x2066: 'LRI', 0x2067: 'RLI', 0x2068: 'FSI', 0x2069: 'PDI' };

  function markOf(ch) {
    const cp = ch.codePointAt(0);
    return '[U+' + cp.toString(16).toUpperCase().padStart(4, '0') + (BIDI[cp] ? ' ' + BIDI[cp] : '') + ']';
  }

  // marked is s with each control or bidi character replaced by its mark.
  function marked(s) { return String(s).replace(SPECIAL, markOf); }

  // escapeSpecial writes the control and bidi characters of JSON text as
  // \uXXXX escapes (the same JSON value, safe to edit).
  function escapeSpecial(s) {
    return s.replace(SPECIAL, (ch) => '\\u' + ch.codePointAt(0).toString(16).padStart(4, '0'));
  }

  // prettyJSON lays a parseJSON tree out as JSON.stringify(v, null, 2) does,
  // numbers as their text; emit(piece, isData) gets the layout's pieces.
  function prettyJSON(node, emit, indent = '') {
    const inner = indent + '  ';
    switch (node.t) {
      case 'obj':
      case 'arr': {
        const obj = node.t === 'obj', list = obj ? node.members : node.items;
        if (!list.length) return emit(obj ? '{}' : '[]', false);
        emit(obj ? '{' : '[', false);
        list.forEach((it, n) => {
          emit((n ? ',' : '') + '\n' + inner, false);
          if (obj) { emit(JSON.stringify(it[0]), true); emit(': ', false); prettyJSON(it[1], emit, inner); } else prettyJSON(it, emit, inner);
        });
        return emit('\n' + indent + (obj ? '}' : ']'), false);
      }
      case 'str': return emit(JSON.stringify(node.v), true);
      case 'num': return emit(node.src, true);
      default: return emit(node.v, false);
    }
  }

  // prettyText is JSON text pretty-printed for a textarea, control and bidi
  // characters escaped.
  function prettyText(src) {
    let out = '';
    prettyJSON(parseJSON(src), (piece, isData) => { out += isData ? escapeSpecial(piece) : piece; });
    return out;
  }

  window.toolgateInbox = Object.freeze({ canonical, canonicalText, parseJSON, digest, claimsJSON, signToken, importKey, marked, prettyText, forkInputDigest });

  // --- The page -----------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const cards = new Map(); // key -> card element
  let signer = null; // {name, key}: in page memory only
  let pages = ['']; // page tokens; the last is the page shown
  let timer = null, inflight = false, again = false;
  let offlineSince = null; // when the list last failed to load: the cards are then as last seen

  // text sets el's text to s, each control or bidi character shown as a
  // mark (a span of class ctl). Only ever text: never HTML.
  function text(el, s) {
    el.textContent = '';
    return put(el, s == null ? '' : String(s));
  }

  // put appends s to el as text, control and bidi characters marked.
  function put(el, s) {
    let last = 0;
    for (const m of s.matchAll(SPECIAL)) {
      if (m.index > last) el.appendChild(document.createTextNode(s.slice(last, m.index)));
      const mark = document.createElement('span');
      mark.className = 'ctl';
      mark.title = 'a control or bidi character in the data, shown instead of applied';
      mark.textContent = markOf(m[0]);
      el.appendChild(mark);
      last = m.index + m[0].length;
    }
    if (last < s.length) el.appendChild(document.createTextNode(s.slice(last)));
    return el;
  }

  // showJSON sets el's text to the JSON text src pretty-printed, numbers
  // exactly as the run holds them, control and bidi characters marked.
  function showJSON(el, src) {
    el.textContent = '';
    try {
      prettyJSON(parseJSON(src), (piece, isData) => {
        if (isData) put(el, piece); else el.appendChild(document.createTextNode(piece));
      });
    } catch (e) {
      put(el, src);
    }
    return el;
  }

  function say(el, msg, kind) {
    text(el, msg);
    el.className = 'msg ' + (kind || '');
  }

  function keyOf(c) {
    return [c.run, c.call_id, c.kind, c.args_digest, c.asked, (c.approved_by || []).join(',')].join('\u0000');
  }

  function until(iso) {
    const ms = Date.parse(iso) - Date.now();
    if (!(ms > 0)) return 'expired';
    const m = Math.floor(ms / 60000), h = Math.floor(m / 60), d = Math.floor(h / 24);
    if (d > 0) return 'expires in ' + d + 'd ' + (h % 24) + 'h';
    if (h > 0) return 'expires in ' + h + 'h ' + (m % 60) + 'm';
    return 'expires in ' + Math.max(m, 0) + 'm';
  }

  function short(s, n) {
    return s.length > n ? s.slice(0, n) + '…' : s;
  }

  // traceLine is one trace record as a line; its JSON values are their exact
  // text (args_text, result_text), never re-serialised from doubles.
  function traceLine(r) {
    let s = '#' + r.seq + ' ' + (r.call_id || '-') + ' ' + r.tool + ' ' + r.status;
    if (r.args_text) s += ' ' + short(r.args_text, 160);
    if (r.original_args_text) s += ' (edited from ' + short(r.original_args_text, 160) + ')';
    if (r.approver) s += ' by ' + r.approver;
    if (r.rule) s += ' (rule ' + r.rule + ')';
    if (r.reason) s += ' — ' + r.reason;
    if (r.error) s += ' error: ' + short(r.error, 200);
    if (r.result_text) s += ' → ' + short(r.result_text, 200);
    return s;
  }

  function policyLine(c) {
    const parts = [];
    if (c.rule) parts.push('rule ' + c.rule);
    if (c.needs) {
      const roles = (c.needs.roles || []).join(', ') || 'any approver';
      parts.push('needs ' + (c.needs.count || 1) + ' of ' + roles);
    }
    if (c.approved_by && c.approved_by.length) parts.push('approved so far by ' + c.approved_by.join(', '));
    if (c.edited_by) parts.push('arguments edited by ' + c.edited_by);
    parts.push(c.policy ? 'signed decisions only' : 'unauthenticated decisions');
    return parts.join(' · ');
  }

  function makeCard(c) {
    const el = $('card').content.firstElementChild.cloneNode(true);
    const q = (s) => el.querySelector(s);
    el.dataset.run = c.run;
    el.dataset.call = c.call_id;
    el.dataset.digest = c.args_digest; // the digest every decision from this card is bound to
    text(q('.tool'), c.tool);
    text(q('.where'), c.run + ' · ' + c.call_id);
    text(q('.kind'), c.kind);
    text(q('.goal'), c.goal ? 'goal: ' + c.goal : '');
    text(q('.reason'), c.reason || 'waits for a decision');
    text(q('.policy'), policyLine(c));
    showJSON(q('.args'), c.call_args_text);
    if (c.original_args_text) {
      const orig = q('.original');
      orig.hidden = false;
      put(text(orig, 'proposed as: '), c.original_args_text);
    }
    text(q('.digest'), 'args_digest ' + c.args_digest);
    try { q('.edited').value = prettyText(c.call_args_text); } catch (e) { q('.edited').value = escapeSpecial(c.call_args_text); }
    const ol = q('.trace ol');
    for (const r of c.trace || []) ol.appendChild(text(document.createElement('li'), traceLine(r)));
    if (c.trace_error) ol.appendChild(text(document.createElement('li'), 'trace unavailable: ' + c.trace_error));
    q('.approve').addEventListener('click', () => decide(el, c, true, null));
    q('.reject').addEventListener('click', () => decide(el, c, false, null));
    q('.approve-edited').addEventListener('click', () => decide(el, c, true, q('.edited').value));
    q('.respond-send').addEventListener('click', () => decide(el, c, 'respond', q('.response').value));
    q('.steps-open').addEventListener('click', () => { $('srun').value = c.run; showSteps(); $('stepsbox').scrollIntoView(); });
    el._call = c;
    return el;
  }

  // decide sends approve (approve true; editedText: edited arguments),
  // reject (false) or respond ('respond'; editedText: the answer in the
  // tool's place, any JSON value).
  async function decide(el, c, approve, editedText) {
    const msg = el.querySelector('.msg');
    const note = el.querySelector('.note').value.trim();
    const reason = el.querySelector('.why').value.trim();
    const respond = approve === 'respond';
    if (!approve && !reason) return say(msg, 'A rejection needs a reason: the planner is told it.', 'bad');
    const name = signer ? signer.name : $('name').value.trim() || 'inbox';
    const body = { run: c.run, decision: respond ? 'respond' : approve ? 'approve' : 'reject', call_id: c.call_id,
      approver: name, args_digest: el.dataset.digest, kind: c.kind };
    if (approve && note) body.note = note;
    if (!approve) body.reason = reason;
    const buttons = el.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    try {
      if (offlineSince) throw new Error('not sent: the list could not be loaded since ' + offlineSince.toLocaleTimeString() + ', so this card may be out of date; wait until the page is live again');
      let edited = '', editedJSON = '', responseJSON = '', responded = '';
      if (respond) {
        let tree;
        try { tree = parseJSON(editedText); } catch (e) { throw new Error('the answer is not JSON: ' + e.message); }
        responseJSON = canonicalTree(tree); // exact: never through a double
        const sum = await crypto.subtle.digest('SHA-256', enc.encode(responseJSON));
        responded = Array.from(new Uint8Array(sum), (b) => b.toString(16).padStart(2, '0')).join('');
      } else if (editedText != null) {
        let tree;
        try { tree = parseJSON(editedText); } catch (e) { throw new Error('the edited arguments are not JSON: ' + e.message); }
        if (tree.t !== 'obj') throw new Error('the edited arguments must be a JSON object');
        editedJSON = canonicalTree(tree); // exact: never through a double
        if (c.policy) edited = await digest(c.tool, editedJSON);
      }
      if (c.policy) {
        if (!signer) throw new Error('this run is under an approval policy: load your signing key above first');
        const now = Math.floor(Date.now() / 1000);
        body.token = await signToken(signer.key, { sub: name, wid: c.run, act: body.decision, call: c.call_id,
          digest: body.args_digest, kind: c.kind, asked: c.asked, edited_digest: edited, data_digest: responded,
          note: body.note, reason: body.reason, iat: now, exp: now + VALID_S });
      }
      say(msg, 'sending…');
      let payload = JSON.stringify(body);
      if (editedJSON) payload = payload.slice(0, -1) + ',"edited_args":' + editedJSON + '}';
      if (responseJSON) payload = payload.slice(0, -1) + ',"response":' + responseJSON + '}';
      const resp = await fetch('/api/decide', { method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-Toolgate-Inbox': '1' }, body: payload });
      const out = await resp.json().catch(() => ({ error: 'HTTP ' + resp.status }));
      if (!resp.ok) {
        if (out.stale) throw new Error('Refused as stale: this call changed or was decided since the page showed it (' + out.error + ')');
        throw new Error('Refused: ' + out.error);
      }
      let done = out.decision + ' ' + out.call_id + ' (' + out.tool + ') by ' + (out.approver || name);
      if (out.decision === 'counted') done += ': ' + (out.approved_by || []).length + ' of ' + out.needed + ' approvals';
      say(msg, done, 'good');
      notice(c.run + ': ' + done, 'good');
      refresh();
    } catch (e) {
      say(msg, e.message, 'bad');
      notice(c.run + ' ' + c.call_id + ': ' + e.message, 'bad');
    } finally {
      buttons.forEach((b) => { b.disabled = !!offlineSince; });
    }
  }

  // --- Steps, rewind and fork ---------------------------------------------

  let steps = null; // the timeline shown: GET /api/steps

  // forkInputDigest is workflows.InputDigest of client.ForkInput(src, at,
  // args): the SHA-256 of the fork input's canonical JSON, argsJSON
  // (canonical JSON text, or '' for none) as the fork's arguments.
  async function forkInputDigest(src, at, argsJSON) {
    const fork = '{' + (argsJSON ? '"args":' + argsJSON + ',' : '') + '"at":' + JSON.stringify(at) + ',"source":' + JSON.stringify(src) + '}';
    const input = '{"fork":' + fork + ',"goal":"","planner":{"kind":""}}';
    return hexOf(await crypto.subtle.digest('SHA-256', enc.encode(input)));
  }

  // operator is who rewinds or forks, and whether the act must be signed.
  function operator() {
    const name = signer ? signer.name : $('name').value.trim() || 'inbox';
    const sign = steps.policy || (!!steps.policy_error && !!signer);
    if (sign && !signer) throw new Error('this run is under an approval policy: load your signing key above first (rewinding and forking need an operators role)');
    return { name, sign };
  }

  async function api(path, body) {
    const init = { credentials: 'same-origin', headers: { 'X-Toolgate-Inbox': '1' } };
    if (body !== undefined) {
      init.method = 'POST';
      init.headers['Content-Type'] = 'application/json';
      init.body = body;
    }
    const resp = await fetch(path, init);
    const out = await resp.json().catch(() => ({ error: 'HTTP ' + resp.status }));
    if (!resp.ok) {
      const e = new Error(out.error || 'HTTP ' + resp.status);
      e.stale = !!out.stale;
      throw e;
    }
    return out;
  }

  function li(list, s) { list.appendChild(text(document.createElement('li'), s)); }

  function callLine(c, withResult) {
    let s = c.call_id + ' ' + c.tool;
    if (c.args_text) s += ' ' + short(c.args_text, 160);
    if (c.decision) s += ' — ' + c.decision + (c.approver ? ' by ' + c.approver : '');
    if (withResult && c.result_text) s += ' → ' + short(c.result_text, 200);
    if (withResult && c.error) s += ' error: ' + short(c.error, 200);
    return s;
  }

  async function showSteps() {
    const id = $('srun').value.trim();
    const msg = $('stepsmsg');
    $('preview').hidden = true;
    $('forkbox').hidden = true;
    if (!id) return say(msg, 'Type the id of a run to show its steps.', 'bad');
    say(msg, 'reading the steps of ' + id + '…');
    try {
      steps = await api('/api/steps?' + new URLSearchParams({ run: id }));
    } catch (e) {
      $('steps').hidden = true;
      return say(msg, 'Cannot read the steps: ' + e.message, 'bad');
    }
    const runs = steps.runs.map((r) => r.run_id + ' ' + r.status).join(', ');
    text($('stepsinfo'), steps.workflow_id + ' · runs: ' + runs + ' · ' + (steps.policy ? 'under a policy: rewinds and forks are signed' :
      steps.policy_error ? 'policy unknown (' + steps.policy_error + ')' : 'no policy: rewinds and forks are unauthenticated'));
    const body = $('stepstable').querySelector('tbody');
    body.textContent = '';
    for (const st of steps.steps) {
      for (const c of st.calls) {
        const tr = document.createElement('tr');
        tr.dataset.call = c.call_id;
        const cell = (s, cls) => { const td = text(document.createElement('td'), s); if (cls) td.className = cls; tr.appendChild(td); return td; };
        cell(String(st.step));
        cell(c.call_id);
        cell(c.tool + (c.destructive ? ' (destructive)' : ''));
        cell(short(c.args_text || '', 120), 'args');
        cell(c.status || 'proposed');
        cell(c.approver ? (c.decision ? c.decision + ' by ' : '') + c.approver : '');
        const act = cell('');
        const rw = text(document.createElement('button'), 'Rewind to here');
        rw.type = 'button';
        rw.className = 'rewind-here';
        rw.addEventListener('click', () => previewRewind(c));
        const fk = text(document.createElement('button'), 'Fork from here');
        fk.type = 'button';
        fk.className = 'fork-here';
        fk.addEventListener('click', () => openFork(c));
        act.append(rw, fk);
        body.appendChild(tr);
      }
    }
    if (!steps.steps.length) say(msg, id + ' has no steps yet.');
    else say(msg, id + ': ' + steps.steps.length + ' steps, ' + steps.last_event + ' events', 'good');
    $('steps').hidden = false;
    $('hidesteps').hidden = false;
  }

  async function previewRewind(c) {
    const box = $('preview'), msg = $('pmsg');
    $('forkbox').hidden = true;
    delete box.dataset.digest;
    for (const id of ['pkept', 'pdropped', 'preads']) $(id).textContent = '';
    text($('ptitle'), 'Rewind ' + steps.workflow_id + ' to just before ' + c.call_id + ' (' + c.tool + ')');
    text($('pdigest'), '');
    text($('predo'), '');
    text($('pmessages'), '');
    say(msg, 'previewing…');
    box.hidden = false;
    $('confirmrewind').disabled = true;
    let p;
    try {
      p = await api('/api/rewind-preview?' + new URLSearchParams({ run: steps.workflow_id, to: c.call_id }));
    } catch (e) {
      return say(msg, 'Cannot preview: ' + e.message, 'bad');
    }
    box.dataset.run = p.workflow_id;
    box.dataset.to = p.to;
    box.dataset.source = p.base_run_id;
    box.dataset.digest = p.digest; // the digest the confirmation is bound to
    text($('ptitle'), 'Rewind ' + p.workflow_id + ' to just before ' + p.to + ' (' + p.tool + ', step ' + p.step + ')');
    for (const k of p.kept) li($('pkept'), callLine(k, true));
    for (const d of p.dropped) li($('pdropped'), callLine(d, false));
    for (const r of p.reads) li($('preads'), callLine(r, false));
    for (const [id, what] of [['pkept', 'none'], ['pdropped', 'none'], ['preads', 'none']]) if (!$(id).children.length) li($(id), what);
    text($('predo'), 'Proposed again: ' + (p.redo.join(', ') || 'nothing'));
    text($('pmessages'), 'Messages dropped: ' + p.messages);
    text($('pdigest'), 'preview digest ' + p.digest);
    say(msg, 'Nothing has changed yet: confirm to rewind.');
    $('confirmrewind').disabled = false;
  }

  async function confirmRewind() {
    const box = $('preview'), msg = $('pmsg'), btn = $('confirmrewind');
    btn.disabled = true;
    try {
      const { name, sign } = operator();
      const body = { run: box.dataset.run, to: box.dataset.to, expect: box.dataset.digest, operator: name };
      if (sign) {
        const now = Math.floor(Date.now() / 1000);
        // reset names the one reset this rewind makes (its request id): the run takes the note only there.
        const reset = hexOf(crypto.getRandomValues(new Uint8Array(16)));
        body.token = await signToken(signer.key, { sub: name, wid: body.run, act: 'rewind', call: body.to,
          source: box.dataset.source, preview: body.expect, reset, iat: now, exp: now + VALID_S });
      }
      say(msg, 'rewinding…');
      const out = await api('/api/rewind', JSON.stringify(body));
      const done = 'rewound ' + body.run + ' to just before ' + body.to + ' by ' + name + ': new run ' + out.run_id;
      notice(done, 'good');
      await showSteps();
      refresh();
    } catch (e) {
      const m = e.stale ? 'Refused as stale: the run moved on since this preview; nothing changed. Preview again (' + e.message + ')' : 'Refused: ' + e.message;
      say(msg, m, 'bad');
      notice(m, 'bad');
    } finally {
      btn.disabled = false;
    }
  }

  function openFork(c) {
    const box = $('forkbox');
    $('preview').hidden = true;
    box.dataset.run = steps.workflow_id;
    box.dataset.at = c.call_id;
    box.dataset.args = c.args_text || '';
    text($('ftitle'), 'Fork ' + steps.workflow_id + ' at ' + c.call_id + ' (' + c.tool + ')');
    $('forkid').value = steps.workflow_id + '-fork-' + c.call_id;
    try { $('forkargs').value = c.args_text ? prettyText(c.args_text) : ''; } catch (e) { $('forkargs').value = escapeSpecial(c.args_text); }
    say($('fmsg'), '');
    box.hidden = false;
  }

  async function startFork() {
    const box = $('forkbox'), msg = $('fmsg'), btn = $('startfork');
    btn.disabled = true;
    try {
      const { name, sign } = operator();
      const id = $('forkid').value.trim();
      if (!id) throw new Error('the fork needs a run id of its own');
      let argsJSON = '';
      const src = $('forkargs').value.trim();
      if (src) {
        let tree;
        try { tree = parseJSON(src); } catch (e) { throw new Error('the arguments are not JSON: ' + e.message); }
        if (tree.t !== 'obj') throw new Error('the arguments must be a JSON object');
        argsJSON = canonicalTree(tree); // exact: never through a double
        if (box.dataset.args && argsJSON === canonicalText(box.dataset.args)) argsJSON = ''; // unedited: the call's own
      }
      const body = { run: box.dataset.run, at: box.dataset.at, id, operator: name };
      if (sign) {
        const now = Math.floor(Date.now() / 1000);
        body.token = await signToken(signer.key, { sub: name, wid: id, act: 'fork',
          input_digest: await forkInputDigest(body.run, body.at, argsJSON), iat: now, exp: now + VALID_S });
      }
      let payload = JSON.stringify(body);
      if (argsJSON) payload = payload.slice(0, -1) + ',"args":' + argsJSON + '}';
      say(msg, 'starting the fork…');
      const out = await api('/api/fork', payload);
      const done = 'forked ' + body.run + ' at ' + body.at + ' as ' + out.id + ' (run ' + out.run_id + ') by ' + name;
      say(msg, done, 'good');
      notice(done, 'good');
      refresh();
    } catch (e) {
      say(msg, 'Refused: ' + e.message, 'bad');
      notice('fork: ' + e.message, 'bad');
    } finally {
      btn.disabled = false;
    }
  }

  function notice(s, kind) {
    const box = $('notices');
    const p = text(document.createElement('p'), s);
    p.className = 'msg ' + kind;
    box.prepend(p);
    while (box.children.length > 5) box.lastElementChild.remove();
  }

  // pauseOf is the fleet-wide pause that stops call c (its tool's, or the
  // pause of every destructive tool, '*', for a call waiting at the gate),
  // or undefined. The call's task queue is not known here: a pause on any
  // served queue marks it.
  function pauseOf(c, paused) {
    return paused.find((p) => p.tool === c.tool) || paused.find((p) => p.tool === '*' && c.kind === 'gate');
  }

  function pauseLine(p) {
    const what = p.tool === '*' ? 'every destructive tool' : p.tool;
    return 'PAUSED fleet-wide on task queue ' + p.task_queue + ': ' + what + ' by ' + p.by + ' at ' + p.at + ': ' + p.reason +
      ' — approvals of its calls are refused until toolgate unpause';
  }

  // showPaused names the tools paused fleet-wide above the calls, and the
  // ledgers that did not answer. Text only: by and reason are an operator's.
  function showPaused(paused, errs) {
    const box = $('paused');
    box.textContent = '';
    for (const p of paused) box.appendChild(text(document.createElement('p'), pauseLine(p)));
    for (const e of errs) {
      const el = text(document.createElement('p'), e);
      el.className = 'unread';
      box.appendChild(el);
    }
    box.hidden = !paused.length && !errs.length;
  }

  function render(list) {
    const box = $('calls');
    const paused = list.paused || [];
    showPaused(paused, list.paused_errors || []);
    const want = [];
    for (const c of list.calls) {
      const k = keyOf(c);
      if (!cards.has(k)) cards.set(k, makeCard(c));
      want.push(cards.get(k));
    }
    const keep = new Set(want);
    for (const [k, el] of cards) if (!keep.has(el)) { el.remove(); cards.delete(k); }
    want.forEach((el, i) => { if (box.children[i] !== el) box.insertBefore(el, box.children[i] || null); });
    for (const el of want) {
      text(el.querySelector('.expires'), until(el._call.expires_at));
      const p = pauseOf(el._call, paused), note = el.querySelector('.paused-note');
      note.hidden = !p;
      text(note, p ? 'paused' : '');
      note.title = p ? marked(pauseLine(p)) : ''; // a property: text, never markup
    }
    $('empty').hidden = list.calls.length > 0;
    $('next').disabled = !list.next;
    $('prev').disabled = pages.length < 2;
    $('next').onclick = () => { pages.push(list.next); refresh(); };
    const open = list.calls.filter((c) => !c.policy).length;
    const auth = $('auth');
    auth.hidden = list.calls.length === 0;
    if (open > 0) text(auth, 'Decisions are unauthenticated: ' + open + ' of these calls belong to runs without an approval policy, so anyone who can reach this inbox or the Temporal frontend can decide them under any name.');
    else if (!signer) text(auth, 'These runs are under an approval policy: decisions must be signed. Load your key (Signing key, above) to decide.');
    else text(auth, 'Decisions are signed in this page as ' + signer.name + '.');
    if (list.failed.length) showError('runs that could not be read: ' + list.failed.map((f) => f.run + ' (' + f.error + ')').join('; '));
  }

  // setStale marks every card as out of date (the list failed to load) and
  // disables its buttons, or, when the list loads again, clears the mark.
  function setStale(on) {
    if (!on) offlineSince = null;
    for (const el of cards.values()) {
      el.classList.toggle('stale', on);
      el.querySelectorAll('button').forEach((b) => { b.disabled = on; });
    }
  }

  function showError(s) {
    const e = $('error');
    e.hidden = !s;
    text(e, s);
  }

  async function refresh() {
    clearTimeout(timer);
    if (inflight) { again = true; return; }
    inflight = true;
    try {
      const p = new URLSearchParams();
      const t = $('ftool').value.trim(), r = $('frun').value.trim(), page = pages[pages.length - 1];
      if (t) p.set('tool', t);
      if (r) p.set('run', r);
      if (page && !r) p.set('page', page);
      const resp = await fetch('/api/pending?' + p, { credentials: 'same-origin', headers: { 'X-Toolgate-Inbox': '1' } });
      const list = await resp.json().catch(() => ({ error: 'HTTP ' + resp.status + ', not the inbox\'s answer' }));
      if (!resp.ok || !list.calls) throw new Error(list.error || 'HTTP ' + resp.status);
      showError('');
      render(list);
      text($('live'), 'live · ' + list.calls.length + ' waiting · ' + new Date().toLocaleTimeString());
      if (offlineSince) setStale(false);
    } catch (e) {
      offlineSince = offlineSince || new Date();
      setStale(true);
      const since = offlineSince.toLocaleTimeString(), n = cards.size;
      const shown = n ? ' The ' + (n === 1 ? 'call' : n + ' calls') + ' below ' + (n === 1 ? 'is' : 'are') +
        ' as last seen and cannot be decided here until the list loads again.' : '';
      if (e instanceof TypeError) { // fetch itself failed: nothing answered
        showError('The inbox server does not answer (since ' + since + ').' + shown +
          ' If the demo or toolgate inbox exited, its runs still wait in Temporal: start it again, or decide with toolgate pending and toolgate approve.');
      } else {
        showError('Cannot list waiting calls (since ' + since + '): ' + e.message + '.' + shown);
      }
      text($('live'), 'offline since ' + since + ', retrying');
    } finally {
      inflight = false;
      if (again) { again = false; refresh(); } else timer = setTimeout(refresh, POLL_MS);
    }
  }

  async function loadKey() {
    const name = $('name').value.trim();
    try {
      if (!name) throw new Error('type your approver name (as the policy names you) first');
      const key = await importKey($('pem').value);
      signer = { name, key };
      $('pem').value = '';
      $('name').readOnly = true;
      text($('keystate'), 'Signing as ' + name + ' (the key is in this page\'s memory only; reloading forgets it).');
      refresh();
    } catch (e) {
      text($('keystate'), 'Key not loaded: ' + e.message);
    }
  }

  function init() {
    const n = document.createElement('div');
    n.id = 'notices';
    $('error').before(n);
    $('loadkey').addEventListener('click', loadKey);
    $('forgetkey').addEventListener('click', () => {
      signer = null;
      $('name').readOnly = false;
      text($('keystate'), 'No key loaded.');
      refresh();
    });
    $('prev').addEventListener('click', () => { pages = ['']; refresh(); });
    $('showsteps').addEventListener('click', showSteps);
    $('srun').addEventListener('keydown', (e) => { if (e.key === 'Enter') showSteps(); });
    $('hidesteps').addEventListener('click', () => {
      for (const id of ['steps', 'preview', 'forkbox', 'hidesteps']) $(id).hidden = true;
      say($('stepsmsg'), '');
    });
    $('confirmrewind').addEventListener('click', confirmRewind);
    $('cancelrewind').addEventListener('click', () => { $('preview').hidden = true; });
    $('startfork').addEventListener('click', startFork);
    $('cancelfork').addEventListener('click', () => { $('forkbox').hidden = true; });
    for (const id of ['ftool', 'frun']) $(id).addEventListener('change', () => { pages = ['']; refresh(); });
    refresh();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
