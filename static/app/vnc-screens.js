// More than one screen: the holder's VNC console opens up to two more
// browser windows ("Add a screen" in the Size list), each showing its own
// part of one wider desktop, as a second and third monitor would. The
// console's window asks the desktop's server for one screen per window
// (SetDesktopSize with a screen each: Xvnc gives each its own RandR
// output, so a window maximises on one screen), side by side in the order
// the screens were added, each the size of its window. Every window has
// its own connection to the desktop's screen (the portal lets a screen
// window join beside the console's own: ?screen=2 on its websocket) and
// shows its part unscaled; pointer and keys go from whichever window has
// them. A desktop with one display (a KubeVirt VM's, Caps.split) is asked
// for one screen as large as the windows together instead, and each
// window shows its part while the desktop has that size, all of it scaled
// otherwise. A screen window that closes folds its screen away; the console's
// window closing or losing its desktop closes its screens. Where the
// browser has the Window Management API and the user allows it, a screen
// window opens on another monitor.
//
// The windows talk with postMessage, on this origin only:
//   screen → console: { corral: 'screen', desktop, n, w, h }, when it
//     opens, each time its window changes size and every HELLO_MS;
//   console → screen: { corral: 'layout', desktop, screens: [{ n, x, y, w, h }],
//     w, h, split } after each, and { corral: 'close', desktop, reason } when
//     it ends.

// MAX_SCREENS counts the console's own window (handlers.maxScreens).
export const MAX_SCREENS = 3;
// HELLO_MS is how often a screen window says it is there; one unheard of
// for GONE_MS (a crashed window) is folded away, as is one whose window
// closed (checked each HELLO_MS).
const HELLO_MS = 1000;
const GONE_MS = 5000;

// screenNumber is this window's screen (2 or 3), or 0 for a console's own
// window.
export function screenNumber() {
  const n = Number(new URLSearchParams(window.location.search).get('screen'));
  return n >= 2 && n <= MAX_SCREENS ? n : 0;
}

// screenSocket returns the websocket path of screen n of a console.
export function screenSocket(path, n) {
  const u = new URL(path, window.location.href);
  u.searchParams.set('screen', String(n));
  return u.pathname + u.search;
}

// SIDES are where a screen window may put its screen, beside those before
// it: right of them (the first), left, below or above.
export const SIDES = { right: 'Right', left: 'Left', below: 'Below', above: 'Above' };

// layoutOf places the screens (the console's own first, { n, w, h, side }
// each) in the order given, each on its side of those before it (right or
// left: top-aligned; below or above: left-aligned with the first), and
// returns them with x and y from the desktop's top-left corner, and the
// desktop's size around them.
export function layoutOf(screens) {
  let [x0, y0, x1, y1] = [0, 0, 0, 0]; // the box around those placed
  const placed = screens.map((s, i) => {
    const side = i === 0 ? '' : s.side || 'right';
    const x = side === 'right' ? x1 : side === 'left' ? x0 - s.w : 0;
    const y = side === 'below' ? y1 : side === 'above' ? y0 - s.h : 0;
    [x0, y0, x1, y1] = [Math.min(x0, x), Math.min(y0, y), Math.max(x1, x + s.w), Math.max(y1, y + s.h)];
    return { n: s.n, x, y, w: s.w, h: s.h };
  });
  return { w: x1 - x0, h: y1 - y0, screens: placed.map((p) => ({ ...p, x: p.x - x0, y: p.y - y0 })) };
}

// pinViewport keeps rfb's view (clipped to its window) at a rect of the
// desktop, also after the desktop changes size; it returns set(rect,
// whole). whole, when given, is the size the windows make together of a
// desktop with one display split across them (Caps.split): the view is
// pinned, unscaled, only while the desktop has that size, and otherwise
// (its server refused it, or the guest has not taken it yet) the window
// shows the whole desktop scaled to it; shown(fits) is told which, at
// each change of the desktop's size. set(null) puts the view back at the
// top-left corner once and leaves it to noVNC from then on.
export function pinViewport(rfb, shown = () => {}) {
  let rect = null;
  let whole = null;
  const moveTo = (r) => {
    const vp = rfb._display._viewportLoc;
    rfb._display.viewportChangePos(r.x - vp.x, r.y - vp.y);
  };
  const place = () => {
    if (!rect || !rfb._display) return;
    if (whole) {
      const fits = rfb._fbWidth === whole.w && rfb._fbHeight === whole.h;
      if (rfb.clipViewport !== fits || rfb.scaleViewport === fits) {
        rfb.scaleViewport = !fits;
        rfb.clipViewport = fits;
      }
      shown(fits);
      if (!fits) return;
    }
    moveTo(rect);
  };
  const resize = rfb._resize;
  rfb._resize = function resized(...args) {
    resize.apply(this, args);
    place();
  };
  return (r, size = null) => {
    if (!r && rect && rfb._display) moveTo({ x: 0, y: 0 });
    rect = r;
    whole = size;
    place();
  };
}

// splitLayout is layout asked of a desktop with one display (Caps.split):
// one screen as large as the windows' screens together, which QEMU's VNC
// passes to the guest as its display's size.
export function splitLayout(layout) {
  return { w: layout.w, h: layout.h, screens: [{ n: 1, x: 0, y: 0, w: layout.w, h: layout.h }] };
}

// sendLayout asks the desktop's server for layout (SetDesktopSize with a
// screen each; RFB's screen ids are the screens' numbers less one, the
// console's own being the server's first, 0 on Xvnc). noVNC 1.7 sends
// only one screen.
export function sendLayout(rfb, layout) {
  const sock = rfb._sock;
  sock.sQpush8(251);
  sock.sQpush8(0);
  sock.sQpush16(layout.w);
  sock.sQpush16(layout.h);
  sock.sQpush8(layout.screens.length);
  sock.sQpush8(0);
  for (const s of layout.screens) {
    sock.sQpush32(s.n === 1 ? rfb._screenID : s.n - 1);
    sock.sQpush16(s.x);
    sock.sQpush16(s.y);
    sock.sQpush16(s.w);
    sock.sQpush16(s.h);
    sock.sQpush32(0);
  }
  sock.flush();
}

// attachScreens keeps the console window's screen windows for desktop
// (its page's URL path). changed() is called whenever one opens, changes
// size, side or goes. It returns { others(), count(), add(), layout(l),
// close(reason), stop() }: others lists the open screen windows' { n, w,
// h, side } (those that have said their size), count how many are open, add
// opens the next one (null when there are MAX_SCREENS or the browser
// blocked it), layout tells them where each is (and, with l.split, that
// they split one display of l.w x l.h), and close that the console ended.
export function attachScreens(desktop, changed) {
  const open = new Map(); // n -> { win, w, h, seen }
  const onMessage = (ev) => {
    const m = ev.data;
    if (ev.origin !== window.location.origin || m?.corral !== 'screen' || m.desktop !== desktop) return;
    const n = Number(m.n);
    const w = Math.floor(Number(m.w));
    const h = Math.floor(Number(m.h));
    const side = Object.hasOwn(SIDES, m.side) ? m.side : 'right';
    if (!(n >= 2 && n <= MAX_SCREENS) || !(w > 0 && h > 0)) return;
    const had = open.get(n);
    const s = { win: ev.source, w, h, side, seen: Date.now() };
    open.set(n, s);
    if (!had || had.w !== w || had.h !== h || had.side !== side) changed();
    else if (last) post(s, told(last));
  };
  let last = null; // the layout last told
  const told = (l) => ({ corral: 'layout', screens: l.screens, w: l.w, h: l.h, split: Boolean(l.split) });
  window.addEventListener('message', onMessage);
  const check = setInterval(() => {
    let gone = false;
    for (const [n, s] of open) {
      if (s.win?.closed || (s.w && Date.now() - s.seen > GONE_MS)) {
        open.delete(n);
        gone = true;
      }
    }
    if (gone) changed();
  }, HELLO_MS);
  const post = (s, m) => { try { s.win?.postMessage({ ...m, desktop }, window.location.origin); } catch { /* closed */ } };
  return {
    others: () => [...open].filter(([, s]) => s.w).map(([n, s]) => ({ n, w: s.w, h: s.h, side: s.side })).sort((a, b) => a.n - b.n),
    count: () => open.size,
    add() {
      let n = 2;
      while (open.has(n)) n++;
      if (n > MAX_SCREENS) return null;
      const url = new URL(window.location.href);
      url.searchParams.set('screen', String(n));
      url.searchParams.set('protocol', 'vnc');
      const win = window.open(url.href, `corral-screen-${n}-${desktop}`,
        `popup,width=${window.innerWidth},height=${window.innerHeight}`);
      if (!win) return null;
      open.set(n, { win, w: 0, h: 0, seen: Date.now() });
      toOtherMonitor(win, n);
      return n;
    },
    layout(l) {
      last = l;
      for (const s of open.values()) post(s, told(l));
    },
    close(reason) { for (const s of open.values()) post(s, { corral: 'close', reason }); },
    stop() {
      clearInterval(check);
      window.removeEventListener('message', onMessage);
    },
  };
}

// toOtherMonitor moves screen window n to another of the user's monitors,
// where the browser has the Window Management API and the user allows it
// (the browser asks once); else it stays where the browser put it.
async function toOtherMonitor(win, n) {
  if (typeof window.getScreenDetails !== 'function') return;
  try {
    const details = await window.getScreenDetails();
    const others = details.screens.filter((s) => s !== details.currentScreen);
    const s = others[(n - 2) % Math.max(1, others.length)];
    if (!s || win.closed) return;
    win.moveTo(s.availLeft, s.availTop);
    win.resizeTo(s.availWidth, s.availHeight);
  } catch { /* not allowed: it stays */ }
}

// attachScreenWindow makes rfb show screen n of the console that opened
// this window: unscaled, its part of the desktop only, never asking the
// desktop for a size of its own. With head, screen n is a VM display's
// head of its own instead, whose size the window's console asks
// (vnc-size.js): it only says it is there and closes with its console.
// screenSize() is this window's screen element's size in whole pixels;
// gone(text) is told when the console ends or its window goes (this
// window then closes). It returns a stop.
export function attachScreenWindow(rfb, desktop, n, screenSize, gone, { head = false } = {}) {
  if (!head) {
    rfb.scaleViewport = false;
    rfb.resizeSession = false;
    rfb.clipViewport = true;
  }
  let unanswered = 0;
  const pin = head ? () => {} : pinViewport(rfb, wholeBadge(n));
  const side = head ? { value: 'right', remove() {} } : sideSelect(() => hello());
  const hello = () => {
    const opener = window.opener;
    if (!opener || opener.closed || unanswered > GONE_MS / HELLO_MS) {
      end('The console window this screen belongs to closed; open the desktop there and add the screen again.');
      return;
    }
    unanswered++;
    const s = screenSize();
    opener.postMessage({ corral: 'screen', desktop, n, w: s.w, h: s.h, side: side.value }, window.location.origin);
  };
  const onMessage = (ev) => {
    const m = ev.data;
    if (ev.origin !== window.location.origin || ev.source !== window.opener || m?.desktop !== desktop) return;
    unanswered = 0;
    if (m.corral === 'close') {
      end(m.reason || 'The console window this screen belongs to ended.');
    } else if (m.corral === 'layout' && Array.isArray(m.screens)) {
      const rect = m.screens.find((s) => s.n === n);
      if (rect) pin(rect, m.split ? { w: m.w, h: m.h } : null);
    }
  };
  let timer = null;
  function end(text) {
    stop();
    gone(text);
    window.close();
  }
  function stop() {
    side.remove();
    clearInterval(timer);
    window.removeEventListener('message', onMessage);
    window.removeEventListener('resize', hello);
  }
  window.addEventListener('message', onMessage);
  window.addEventListener('resize', hello);
  timer = setInterval(hello, HELLO_MS);
  hello();
  return stop;
}

// wholeBadge returns what a screen window of a split display (Caps.split)
// is told as it shows its part or, while the desktop has not the size of
// the windows together, all of it: its badge says which.
function wholeBadge(n) {
  return (fits) => {
    const badge = document.querySelector('.screen-badge');
    if (!badge) return;
    badge.textContent = fits ? `Screen ${n}` : `Screen ${n}: all of the desktop`;
    badge.title = fits ? '' : "The desktop is not the size of its windows together (its server refused it, or the VM has not taken it yet), so this window shows all of it, scaled; the console's window says why under Size.";
  };
}

// sideSelect puts first among the screen window's controls (folded into
// its Menu on a phone) the choice of where its screen is, beside the
// screens before it; changed is told of each change. It returns the
// select, whose remove takes the choice away.
function sideSelect(changed) {
  const label = document.createElement('label');
  label.className = 'screen-side';
  label.title = 'Where this screen is, beside the ones before it: as your monitors stand';
  label.append('Place ');
  const select = document.createElement('select');
  select.dataset.testid = 'screen-side';
  select.append(...Object.entries(SIDES).map(([v, name]) => new Option(name, v)));
  select.addEventListener('change', changed);
  select.remove = () => label.remove();
  label.append(select);
  const controls = document.getElementById('console-controls');
  if (controls) controls.prepend(label);
  else document.body.append(label);
  return select;
}
