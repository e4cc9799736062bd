// toolgate's signed tokens in the browser, shared by the approvals inbox and
// the confirm page (package internal/webkeys serves this one copy at
// /sign.js): canonical JSON (RFC 8785, as tool.Canonical), tool.Digest, the
// claims of signed.Claims written as Go writes them, and a compact JWS signed
// with WebCrypto Ed25519 (as signed.Sign), with a key read from the PKCS#8 PEM
// that toolgate keys new writes. No dependencies; the key never leaves the
// page. Exposed as window.toolgateSign.
'use strict';
(() => {
  const enc = new TextEncoder();
  const HEADER = '{"alg":"EdDSA","typ":"toolgate+jwt"}';

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

  // --- Exact JSON: numbers kept as the text they are --------------------
  //
  // JSON.parse turns every number into a double, which rounds an integer above
  // 2^53 (12345678901234567893 becomes …892). Arguments are therefore shown,
  // edited and digested from their JSON text, parsed into a tree whose numbers
  // stay text.

  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

  // parseJSON reads JSON text into a tree: {t:'obj', members:[[key, node]…]},
  // {t:'arr', items}, {t:'str', v}, {t:'num', src} or {t:'lit', v}. A key given
  // twice in one object is refused, as the run refuses it.
  function parseJSON(src) {
    let i = 0;
    const fail = (what) => { throw new Error('not JSON: want ' + what + ' at offset ' + i); };
    const ws = () => { while (i < src.length && ' \t\n\r'.includes(src[i])) i++; };
    const token = (re, what) => {
      re.lastIndex = i;
      const m = re.exec(src);
      if (!m) fail(what);
      i = re.lastIndex;
      return m[0];
    };
    const value = (depth) => {
      if (depth > 500) fail('less nesting');
      ws();
      const ch = src[i];
      if (ch === '{' || ch === '[') {
        i++;
        const obj = ch === '{', close = obj ? '}' : ']', out = [], seen = new Set();
        ws();
        if (src[i] === close) { i++; return obj ? { t: 'obj', members: out } : { t: 'arr', items: out }; }
        for (;;) {
          if (obj) {
            ws();
            const k = JSON.parse(token(STRING, 'a key'));
            if (seen.has(k)) fail('no key twice (' + JSON.stringify(k) + ')');
            seen.add(k);
            ws();
            if (src[i] !== ':') fail("':'");
            i++;
            out.push([k, value(depth + 1)]);
          } else {
            out.push(value(depth + 1));
          }
          ws();
          if (src[i] === ',') { i++; continue; }
          if (src[i] === close) { i++; return obj ? { t: 'obj', members: out } : { t: 'arr', items: out }; }
          fail("',' or '" + close + "'");
        }
      }
      if (ch === '"') return { t: 'str', v: JSON.parse(token(STRING, 'a string')) };
      for (const lit of ['true', 'false', 'null']) {
        if (src.startsWith(lit, i)) { i += lit.length; return { t: 'lit', v: lit }; }
      }
      return { t: 'num', src: token(NUMBER, 'a value') };
    };
    const v = value(0);
    ws();
    if (i !== src.length) fail('nothing after the value');
    return v;
  }

  // canonicalNumber is tool.Canonical's number: the exact decimal value laid
  // out as ECMAScript's Number::toString does (1.50 → 1.5, 1e3 → 1000), never
  // through a double.
  function canonicalNumber(src) {
    const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/.exec(src);
    if (!m) throw new Error('not a JSON number: ' + src);
    const [, neg, intPart, frac = '', expSign, exp] = m;
    if (m[3] === undefined && exp === undefined && intPart.length <= 21) return intPart === '0' ? '0' : src;
    let s = intPart + frac;
    let lead = 0;
    while (lead < s.length && s[lead] === '0') lead++;
    if (lead === s.length) return '0';
    let trail = s.length;
    while (s[trail - 1] === '0') trail--;
    const shift = BigInt(s.length - trail) - BigInt(frac.length) + BigInt(trail - lead);
    s = s.slice(lead, trail);
    let e = exp === undefined ? 0n : BigInt(exp);
    if (expSign === '-') e = -e;
    const n = e + shift, k = BigInt(s.length);
    let out;
    if (k <= n && n <= 21n) out = s + '0'.repeat(Number(n - k));
    else if (0n < n && n <= 21n) out = s.slice(0, Number(n)) + '.' + s.slice(Number(n));
    else if (-6n < n && n <= 0n) out = '0.' + '0'.repeat(Number(-n)) + s;
    else out = s[0] + (s.length > 1 ? '.' + s.slice(1) : '') + 'e' + (n - 1n >= 0n ? '+' : '') + (n - 1n).toString();
    return neg + out;
  }

  // canonicalTree is tool.Canonical of a parseJSON tree.
  function canonicalTree(node) {
    switch (node.t) {
      case 'obj': {
        const ms = node.members.slice().sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
        return '{' + ms.map(([k, v]) => JSON.stringify(k) + ':' + canonicalTree(v)).join(',') + '}';
      }
      case 'arr': return '[' + node.items.map(canonicalTree).join(',') + ']';
      case 'str': return JSON.stringify(node.v);
      case 'num': return canonicalNumber(node.src);
      default: return node.v;
    }
  }

  // canonicalText is tool.Canonical of JSON text, exactly.
  function canonicalText(src) { return canonicalTree(parseJSON(src)); }

  // digest is tool.Digest: hex SHA-256 of tool + "::" + canonical(args), args
  // given as JSON text (exact) or as a parsed value.
  async function digest(toolName, args) {
    const c = typeof args === 'string' ? canonicalText(args) : canonical(args);
    const sum = await crypto.subtle.digest('SHA-256', enc.encode(toolName + '::' + c));
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
    for (const k of ['edited_digest', 'data_digest', 'note', 'reason', 'input_digest', 'source', 'preview', 'via', 'link', 'reset', 'jti']) if (c[k]) str(k, c[k]);
    int('iat', c.iat); int('exp', c.exp);
    return '{' + out.join(',') + '}';
  }

  // signToken makes a compact JWS (EdDSA, typ toolgate+jwt) of the claims,
  // with a random id (jti, 16 bytes in hex, as signed.NewID) when they have
  // none: a token is deterministic in its claims and iat counts seconds, so
  // without one a decision clicked twice within a second would be one token,
  // which a run takes once.
  async function signToken(key, claims) {
    if (!claims.jti) claims = Object.assign({}, claims, { jti: hexOf(crypto.getRandomValues(new Uint8Array(16))) });
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

  // hexOf is the lower-case hex of a buffer's bytes.
  function hexOf(buf) {
    return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  window.toolgateSign = Object.freeze({ b64url, canonical, parseJSON, canonicalNumber, canonicalTree, canonicalText, digest,
    claimsJSON, signToken, importKey, hexOf });
})();
