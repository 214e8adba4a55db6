// Small progressive enhancements for server-rendered forms: confirmation
// before destructive actions and a busy label while a request runs.
document.addEventListener('submit', (ev) => {
  const form = ev.target;
  const question = form.dataset.confirm;
  if (question && !window.confirm(question)) {
    ev.preventDefault();
    return;
  }
  const busy = form.dataset.busy;
  const button = form.querySelector('button[type=submit]');
  if (button) {
    if (busy) button.textContent = busy;
    // Disable after the submit is under way so the form still sends.
    setTimeout(() => { button.disabled = true; }, 0);
  }
});
