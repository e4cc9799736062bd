// toolgate approvals inbox. No dependencies, no build step. Every string that
// comes from a run or a tool is inserted with textContent, never as HTML.
'use strict';
(() => {
  const enc = new TextEncoder();
  const HEADER = '{"alg":"EdDSA","typ":"toolgate+jwt"}';
  const POLL_MS = 1500;
  const VALID_S = 600; // a signed decision is valid for 10 minutes, as the CLI's

  // --- Tokens: the same form as signed.Sign -------------------------------

  function b64url(bytes) {
    let s = '';
    for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // canonical is RFC 8785 (JCS) of a parsed JSON value, as tool.Canonical.
  function canonical(v) {
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new Error('not a finite number');
      return JSON.stringify(v);
    }
    if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
    if (typeof v === 'object') {
      const keys = Object.keys(v).sort(); // UTF-16 code unit order, as JCS
      return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
    }
    throw new Error('not a JSON value');
  }

  // digest is tool.Digest: hex SHA-256 of tool + "::" + canonical(args).
  async function digest(toolName, args) {
    const sum = await crypto.subtle.digest('SHA-256', enc.encode(toolName + '::' + canonical(args)));
    return Array.from(new Uint8Array(sum), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  // claimsJSON writes signed.Claims as Go does: the same names, the optional
  // ones left out when empty (omitempty). asked is a decimal string (Unix
  // nanoseconds do not fit a JavaScript number) written as a JSON number.
  function claimsJSON(c) {
    const out = [];
    const str = (k, v) => out.push(JSON.stringify(k) + ':' + JSON.stringify(String(v)));
    const int = (k, v) => {
      if (!Number.isSafeInteger(v)) throw new Error(k + ' is not an integer');
      out.push(JSON.stringify(k) + ':' + v);
    };
    str('sub', c.sub); str('wid', c.wid); str('act', c.act);
    for (const k of ['call', 'digest', 'kind']) if (c[k]) str(k, c[k]);
    if (c.asked && c.asked !== '0') {
      if (!/^-?[1-9][0-9]{0,18}$/.test(c.asked)) throw new Error('asked is not an integer');
      out.push('"asked":' + c.asked);
    }
    for (const k of ['edited_digest', 'note', 'reason']) if (c[k]) str(k, c[k]);
    int('iat', c.iat); int('exp', c.exp);
    return '{' + out.join(',') + '}';
  }

  // signToken makes a compact JWS (EdDSA, typ toolgate+jwt) of the claims.
  async function signToken(key, claims) {
    const input = b64url(enc.encode(HEADER)) + '.' + b64url(enc.encode(claimsJSON(claims)));
    const sig = await crypto.subtle.sign({ name: 'Ed25519' }, key, enc.encode(input));
    return input + '.' + b64url(new Uint8Array(sig));
  }

  // importKey reads the PEM "PRIVATE KEY" (PKCS#8) that toolgate keys new writes.
  async function importKey(pem) {
    const m = /-----BEGIN PRIVATE KEY-----([\s\S]*?)-----END PRIVATE KEY-----/.exec(pem);
    if (!m) throw new Error('not a PEM "PRIVATE KEY" block (the NAME.key file toolgate keys new wrote)');
    if (!window.crypto || !crypto.subtle) throw new Error('WebCrypto is unavailable: open the inbox over https or on a loopback address');
    const der = Uint8Array.from(atob(m[1].replace(/\s+/g, '')), (ch) => ch.charCodeAt(0));
    return crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign']);
  }

  window.toolgateInbox = Object.freeze({ canonical, digest, claimsJSON, signToken, importKey });

  // --- The page -----------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const cards = new Map(); // key -> card element
  let signer = null; // {name, key}: in page memory only
  let pages = ['']; // page tokens; the last is the page shown
  let timer = null, inflight = false, again = false;

  function text(el, s) { el.textContent = s == null ? '' : String(s); return el; }

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

  function short(v, n) {
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    return s.length > n ? s.slice(0, n) + '…' : s;
  }

  function traceLine(r) {
    let s = '#' + r.seq + ' ' + (r.call_id || '-') + ' ' + r.tool + ' ' + r.status;
    if (r.args !== undefined) s += ' ' + short(r.args, 160);
    if (r.approver) s += ' by ' + r.approver;
    if (r.rule) s += ' (rule ' + r.rule + ')';
    if (r.reason) s += ' — ' + r.reason;
    if (r.error) s += ' error: ' + short(r.error, 200);
    if (r.result !== undefined && r.result !== null) s += ' → ' + short(r.result, 200);
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
    const pretty = JSON.stringify(c.call_args, null, 2);
    text(q('.args'), pretty);
    text(q('.digest'), 'args_digest ' + c.args_digest);
    q('.edited').value = pretty;
    const ol = q('.trace ol');
    for (const r of c.trace || []) ol.appendChild(text(document.createElement('li'), traceLine(r)));
    if (c.trace_error) ol.appendChild(text(document.createElement('li'), 'trace unavailable: ' + c.trace_error));
    q('.approve').addEventListener('click', () => decide(el, c, true, null));
    q('.reject').addEventListener('click', () => decide(el, c, false, null));
    q('.approve-edited').addEventListener('click', () => decide(el, c, true, q('.edited').value));
    el._call = c;
    return el;
  }

  async function decide(el, c, approve, editedText) {
    const msg = el.querySelector('.msg');
    const note = el.querySelector('.note').value.trim();
    const reason = el.querySelector('.why').value.trim();
    if (!approve && !reason) return say(msg, 'A rejection needs a reason: the planner is told it.', 'bad');
    const name = signer ? signer.name : $('name').value.trim() || 'inbox';
    const body = { run: c.run, decision: approve ? 'approve' : 'reject', call_id: c.call_id,
      approver: name, args_digest: el.dataset.digest, kind: c.kind };
    if (approve && note) body.note = note;
    if (!approve) body.reason = reason;
    const buttons = el.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    try {
      let edited = '';
      if (editedText != null) {
        let args;
        try { args = JSON.parse(editedText); } catch (e) { throw new Error('the edited arguments are not JSON: ' + e.message); }
        if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new Error('the edited arguments must be a JSON object');
        body.edited_args = args;
        if (c.policy) edited = await digest(c.tool, args);
      }
      if (c.policy) {
        if (!signer) throw new Error('this run is under an approval policy: load your signing key above first');
        const now = Math.floor(Date.now() / 1000);
        body.token = await signToken(signer.key, { sub: name, wid: c.run, act: body.decision, call: c.call_id,
          digest: body.args_digest, kind: c.kind, asked: c.asked, edited_digest: edited,
          note: body.note, reason: body.reason, iat: now, exp: now + VALID_S });
      }
      say(msg, 'sending…');
      const resp = await fetch('/api/decide', { method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-Toolgate-Inbox': '1' }, body: JSON.stringify(body) });
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
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  function notice(s, kind) {
    const box = $('notices');
    const p = text(document.createElement('p'), s);
    p.className = 'msg ' + kind;
    box.prepend(p);
    while (box.children.length > 5) box.lastElementChild.remove();
  }

  function render(list) {
    const box = $('calls');
    const want = [];
    for (const c of list.calls) {
      const k = keyOf(c);
      if (!cards.has(k)) cards.set(k, makeCard(c));
      want.push(cards.get(k));
    }
    const keep = new Set(want);
    for (const [k, el] of cards) if (!keep.has(el)) { el.remove(); cards.delete(k); }
    want.forEach((el, i) => { if (box.children[i] !== el) box.insertBefore(el, box.children[i] || null); });
    for (const el of want) text(el.querySelector('.expires'), until(el._call.expires_at));
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
      const list = await resp.json();
      if (!resp.ok) throw new Error(list.error || 'HTTP ' + resp.status);
      showError('');
      render(list);
      text($('live'), 'live · ' + list.calls.length + ' waiting · ' + new Date().toLocaleTimeString());
    } catch (e) {
      showError('cannot list waiting calls: ' + e.message);
      text($('live'), 'offline, retrying');
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
    for (const id of ['ftool', 'frun']) $(id).addEventListener('change', () => { pages = ['']; refresh(); });
    refresh();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
