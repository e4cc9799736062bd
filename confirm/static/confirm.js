// toolgate confirm page: under an approval policy, when the link alone does
// not decide, sign the decision here with the approver's own key (read from
// the key file chosen, kept in this page only, never sent) and post it in
// the form's token field. No dependencies; sign.js (window.toolgateSign)
// does the signing, as it does for the inbox.
'use strict';
(() => {
  const form = document.getElementById('decide');
  if (!form || form.dataset.sign !== '1') return;
  const msg = document.getElementById('msg');
  let signed = false;
  form.addEventListener('submit', async (ev) => {
    if (signed) return; // the signed form, submitted again below
    ev.preventDefault();
    const submitter = ev.submitter;
    const act = submitter ? submitter.value : '';
    const reason = form.elements.reason.value.trim();
    const name = document.getElementById('name').value.trim();
    const file = document.getElementById('keyfile').files[0];
    try {
      const g = window.toolgateSign;
      if (!g) throw new Error('sign.js did not load');
      if (act !== 'approve' && act !== 'reject') throw new Error('press Approve or Reject');
      if (!name) throw new Error('type your approver name');
      if (!file) throw new Error('choose your key file (NAME.key, which toolgate keys new NAME wrote)');
      if (act === 'reject' && !reason) throw new Error('a rejection needs a reason: the planner is told it');
      const key = await g.importKey(await file.text());
      const d = form.dataset, now = Math.floor(Date.now() / 1000);
      const claims = { sub: name, wid: d.wid, act, call: d.call, digest: d.digest, kind: d.kind, asked: d.asked,
        iat: now, exp: now + Number(d.valid) };
      if (act === 'approve') claims.note = reason; else claims.reason = reason;
      form.elements.token.value = await g.signToken(key, claims);
      msg.textContent = 'signed; sending…';
      signed = true;
      form.requestSubmit(submitter);
    } catch (e) {
      msg.textContent = 'Not signed, nothing sent: ' + e.message;
    }
  });
})();
