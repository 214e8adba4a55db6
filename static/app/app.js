// Small progressive enhancements for server-rendered forms: an in-page
// confirmation before destructive actions (data-confirm; never the
// browser's confirm(), which blocks the page and cannot be styled or
// reached the same way on every device) and a busy label while a request
// runs.

// confirmDialog returns the page's one confirmation dialog, made on first use.
function confirmDialog() {
  let dlg = document.getElementById('confirm-dialog');
  if (dlg) return dlg;
  dlg = document.createElement('dialog');
  dlg.id = 'confirm-dialog';
  dlg.className = 'card confirm-dialog';
  dlg.dataset.testid = 'confirm-dialog';
  dlg.setAttribute('aria-labelledby', 'confirm-question');
  const q = Object.assign(document.createElement('p'), { id: 'confirm-question' });
  const row = Object.assign(document.createElement('div'), { className: 'actions' });
  const yes = Object.assign(document.createElement('button'), { type: 'button', className: 'primary danger' });
  const no = Object.assign(document.createElement('button'), { type: 'button', textContent: 'Cancel' });
  yes.dataset.testid = 'confirm-yes';
  no.dataset.testid = 'confirm-no';
  row.append(yes, no);
  dlg.append(q, row);
  no.addEventListener('click', () => dlg.close());
  document.body.append(dlg);
  return dlg;
}

// ask shows question for form and submits it once the user confirms.
function ask(form, question) {
  const dlg = confirmDialog();
  const [yes, no] = dlg.querySelectorAll('button');
  dlg.querySelector('p').textContent = question;
  yes.textContent = form.dataset.confirmLabel || form.querySelector('button[type=submit]')?.textContent.trim() || 'Confirm';
  yes.onclick = () => {
    dlg.close();
    form.dataset.confirmed = 'true';
    form.requestSubmit();
  };
  dlg.showModal();
  no.focus(); // the safe answer is the one Enter gives
}

document.addEventListener('submit', (ev) => {
  if (ev.defaultPrevented) return; // a form the page sends itself (Share) stays usable
  const form = ev.target;
  const question = form.dataset.confirm;
  if (question && form.dataset.confirmed !== 'true') {
    ev.preventDefault();
    ask(form, question);
    return;
  }
  delete form.dataset.confirmed;
  const busy = form.dataset.busy;
  const button = form.querySelector('button[type=submit]');
  if (button) {
    if (busy) button.textContent = busy;
    // Disable after the submit is under way so the form still sends.
    setTimeout(() => { button.disabled = true; }, 0);
  }
});
