// The console page's ended card: when a console ends, one card over the
// dimmed last frame says what happened in words and offers the one action
// that helps, and the controls that no longer apply go (body[data-ended]).

// endedKind classifies an end: 'final' (the desktop is no longer the
// user's: released, reclaimed), 'taken' (opened in another tab), 'retry'
// (a drop that reconnects by itself), 'refused' (the portal said no
// before it connected) or 'lost' (anything else). A console beside the
// holder's (admin-shadow.js) that will not come back is 'ended'.
export function endedKind(text, final, retry, refused = false) {
  if (final) return 'final';
  if (/^taken over\b/i.test(text)) return 'taken';
  if (retry) return 'retry';
  return refused ? 'refused' : 'lost';
}

const titles = {
  final: 'This desktop is no longer yours',
  taken: 'Opened in another tab or window',
  retry: 'Connection lost',
  lost: 'Disconnected',
  refused: 'Not connected',
  ended: 'This console has closed',
};

// Kinds whose one action is the way home: reconnecting cannot help.
const gone = new Set(['final', 'ended']);

// logins the page learnt after it loaded (nameLogin).
const logins = new Set();

// nameLogin has capitalised keep login as it is where a reason starts
// with it: a holder the page learnt of after it loaded (a role change
// named them, and the page loaded again before its desktop showed them).
export function nameLogin(login) {
  if (login) logins.add(login);
}

// capitalised makes a close reason ("taken over: this desktop …") a
// sentence: capital first letter, a full stop at the end. A reason that
// starts with the holder's login keeps it as it is ("alice did not allow
// the watch."): logins are case-sensitive, and "Alice" is someone else.
export function capitalised(text) {
  const holder = document.getElementById('screen')?.dataset.holder;
  const named = [holder, ...logins].some((login) => login && text.startsWith(`${login} `));
  const t = named ? text : text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?…]$/.test(t) ? t : `${t}.`;
}

// sentence is a close reason as the page says it: "taken over: this
// desktop …" reads "This desktop … .", in the card and in the header.
export function sentence(text) {
  return capitalised(text.replace(/^taken over: /i, ''));
}

// attachEnded wires the card; it returns { show(kind, reason),
// down(words, start), countdown(text), hide() }.
export function attachEnded(card) {
  const title = card.querySelector('#ended-title');
  const reason = card.querySelector('#ended-reason');
  const reconnect = card.querySelector('#reconnect');
  const home = card.querySelector('#home');
  const startAgain = card.querySelector('#start-again');
  let onStart = null;
  startAgain?.addEventListener('click', () => onStart?.());
  // focusOn lands a keyboard user on the action (unless typing elsewhere).
  const focusOn = (el) => {
    if (!document.activeElement || document.activeElement === document.body || document.activeElement.closest('#screen')) el.focus();
  };
  return {
    show(kind, text) {
      document.body.dataset.ended = kind;
      title.textContent = titles[kind];
      reason.textContent = sentence(text);
      reconnect.hidden = gone.has(kind);
      reconnect.textContent = { taken: 'Use it here', retry: 'Reconnect now', refused: 'Try again' }[kind] || 'Reconnect';
      home.hidden = !gone.has(kind);
      home.classList.add('primary');
      if (startAgain) startAgain.hidden = true;
      card.hidden = false;
      focusOn(gone.has(kind) ? home : reconnect);
    },
    // down shows a desktop that stopped (down.js's words: title, reason,
    // action) with its way back; start runs when the user takes it.
    down(words, start) {
      document.body.dataset.ended = 'down';
      title.textContent = words.title;
      reason.textContent = words.reason;
      reconnect.hidden = true;
      home.hidden = false;
      home.classList.remove('primary');
      startAgain.textContent = words.action;
      startAgain.disabled = false;
      startAgain.hidden = false;
      onStart = start;
      card.hidden = false;
      focusOn(startAgain);
    },
    // busy says the way back is under way (or, with done, that it failed).
    busy(text, done = false) {
      reason.textContent = text;
      if (startAgain) startAgain.disabled = !done;
    },
    // countdown updates the reason of a 'retry' card.
    countdown(text) { reason.textContent = text; },
    hide() {
      delete document.body.dataset.ended;
      card.hidden = true;
    },
  };
}
