// The VNC console's size: noVNC asks the desktop's server for the size the
// user's Size choice names (size.js) with SetDesktopSize, which local
// Xvnc desktops follow (ExtendedDesktopSize), and scales the desktop to
// the window; Actual size asks nothing and shows it unscaled. A desktop that
// keeps its size (the platform says so, or its server refuses the
// window's size: QEMU without a display that follows) is scaled instead;
// a fixed size its server refuses is said in words. With screen windows
// open (vnc-screens.js) each screen takes its window's size instead.
import { attachSize } from './size.js';
import { attachScreens, layoutOf, MAX_SCREENS, pinViewport, sendLayout, splitLayout } from './vnc-screens.js';

// PHONE_WIDTH is the narrowest desktop a console asks of the server: on a
// phone the desktop stays this wide (logical pixels), shown whole at fit,
// and a pinch (or the Zoom 1:1 button) zooms in, as on a tablet's photo.
export const PHONE_WIDTH = 1024;

// PHONE_MAX_HEIGHT bounds a phone's desktop: 2.5 times PHONE_WIDTH, taller
// than any phone's screen in portrait below the console bar (390 x 788 CSS
// px asks 1024 x 2069), so the desktop fills the screen at fit; its frame
// buffer stays about 10 MB.
const PHONE_MAX_HEIGHT = 2560;

// desktopSize is the size to ask the server for a screen of w x h CSS px:
// the screen's own when it is wide enough, else PHONE_WIDTH wide with the
// screen's shape (at least 640 px high, so a phone on its side still gets
// a desktop whose windows fit; at most PHONE_MAX_HEIGHT).
export function desktopSize(w, h) {
  if (w >= PHONE_WIDTH || w <= 0) return { w, h };
  return { w: PHONE_WIDTH, h: Math.round(Math.min(PHONE_MAX_HEIGHT, Math.max(640, h * PHONE_WIDTH / w))) };
}

// sized makes rfb read its screen's size in whole CSS pixels, ask the
// server for want(that size) rather than the screen itself, and never
// ask again for a size the server has answered; asked(d) is told each
// size it asks. noVNC 1.7 (pinned in package.json) reads the size from
// _screenSize(), both to scale to and, inside _requestRemoteResize(), to
// ask for and to tell whether the desktop has it yet; it asks again after
// each answer until the two agree (every 100 ms at most). A screen a
// fraction of a pixel high (a 56.5625 px console bar above an 800 px
// window leaves 743.4375) never equals the whole-pixel desktop it is
// given, so an idle console asked forever, each answer a repaint: 0.1-0.7
// MB/s. A server that answers with a size of its own (or refuses) is not
// asked the same again until the screen or the choice changes, or
// forget() is called (the desktop was given another layout meanwhile).
function sized(rfb, want, asked) {
  const ask = rfb._requestRemoteResize;
  const own = rfb._screenSize;
  if (typeof ask !== 'function' || typeof own !== 'function') return { forget() {} };
  function whole() { const s = own.call(this); return { w: Math.floor(s.w), h: Math.floor(s.h) }; }
  rfb._screenSize = whole;
  let last = null; // the size last sent, answered or not
  rfb._requestRemoteResize = function requestRemoteResize() {
    const d = want(whole.call(this));
    if (last && last.w === d.w && last.h === d.h && !this._pendingRemoteResize) return;
    const pending = this._pendingRemoteResize;
    this._screenSize = () => d;
    try { ask.call(this); } finally { this._screenSize = whole; }
    if (!pending && this._pendingRemoteResize) {
      last = d;
      asked(d);
    }
  };
  return { forget() { last = null; } };
}

// answers calls onAnswer(status) for each ExtendedDesktopSize rfb reads:
// status is the server's answer to this console's SetDesktopSize (0
// done, 1-3 refused, 4 passed to the guest: QEMU's), or -1 for another
// change. noVNC 1.7 only logs a refusal.
function answers(rfb, onAnswer) {
  const handle = rfb._handleExtendedDesktopSize;
  if (typeof handle !== 'function') return;
  rfb._handleExtendedDesktopSize = function handleExtendedDesktopSize() {
    const done = handle.call(this);
    if (done) onAnswer(this._FBU.x === 1 ? this._FBU.y : -1);
    return done;
  };
}

// attach makes rfb follow the user's Size choice. keeps: the platform says
// the desktop keeps its own size; oneHead: that its display has one head
// (a VM's), so it has no screen windows; split: that its one display
// grows to the screen windows' size together, each showing its part (a
// KubeVirt VM's: Caps.split); heads: that it is a VM's display
// with that many heads, each shown by a screen window of its own, its
// window's size (no layout of screens is sent); head: this is such a
// screen window, which follows its window's size and has no Size list;
// beside: a viewer beside the holder, who leaves the size to the holder
// (and gets no choice); desktop: the console page's path, which names its
// screen windows. It returns { zoomed(on), ended(text), close() }: while a
// pinch zooms the view, the desktop keeps its size; ended closes the
// screen windows.
export function attach(rfb, { keeps = false, oneHead = false, split = false, heads = 0, head = false, beside = false, desktop = '' } = {}) {
  let choice = { kind: 'fit' };
  let zoomed = false;
  let asked = null; // the last size asked, and the choice that asked it
  let sentLayout = ''; // the screens' layout last asked, as a key
  const lone = beside || head; // no Size list, no screen windows
  const screens = lone ? null : attachScreens(desktop, () => apply());
  let fits = true; // a split display has the windows' size together
  // Its own screen's part, when others are left of or above it (or the
  // display is split).
  const pin = lone || heads > 1 ? () => {} : pinViewport(rfb, (f) => {
    if (f === fits) return;
    fits = f;
    menu?.changed();
  });
  let menu = null;
  // A layout of several screens is Xvnc's; a VM's heads each take their
  // own window's size.
  const multi = () => heads < 2 && Boolean(screens?.others().length);
  const apply = () => {
    const many = multi();
    if (!many || !split) { // a split display's view is pin's
      rfb.clipViewport = many;
      rfb.scaleViewport = !many && choice.kind !== 'actual';
    }
    rfb.resizeSession = !many && !beside && !zoomed && !keeps && choice.kind !== 'actual';
    if (heads > 1 && screens) {
      // A VM's heads are laid out by the guest: the screen windows are
      // only told, in answer to each hello, that this console is there.
      screens.layout({ w: 0, h: 0, screens: [] });
    } else if (many) {
      const own = rfb._screenSize();
      const layout = { ...layoutOf([{ n: 1, w: own.w, h: own.h }, ...screens.others()]), split };
      pin(layout.screens[0], split ? { w: layout.w, h: layout.h } : null);
      const key = JSON.stringify(layout);
      if (key !== sentLayout && rfb._supportsSetDesktopSize && rfb._rfbConnectionState === 'connected') {
        sentLayout = key;
        asked = { w: layout.w, h: layout.h, choice: { kind: 'screens', n: layout.screens.length, split, w: layout.w, h: layout.h } };
        rfb._pendingRemoteResize = true;
        sendLayout(rfb, split ? splitLayout(layout) : layout);
      }
      screens.layout(layout);
    } else if (sentLayout) {
      // Back to one screen: the window's own size (or the choice's) again.
      sentLayout = '';
      fits = true;
      pin(null);
      menu?.settled();
      size.forget();
      rfb._requestRemoteResize();
    }
    menu?.changed();
  };
  const size = sized(rfb, (s) => (choice.kind === 'fixed' ? { w: choice.w, h: choice.h } : desktopSize(s.w, s.h)),
    (d) => { asked = { ...d, choice }; });
  menu = lone ? null : attachSize(document.querySelector('.size-menu'), {
    apply(c) {
      choice = c;
      apply();
    },
    resizable: () => !keeps,
    size: () => (rfb._fbWidth ? { w: rfb._fbWidth, h: rfb._fbHeight } : null),
    screens: () => ({
      count: 1 + screens.count(),
      max: heads > 1 ? Math.min(heads, MAX_SCREENS) : MAX_SCREENS,
      can: (heads > 1 || (!keeps && !oneHead)) && window.innerWidth >= PHONE_WIDTH,
      split,
      fits: () => fits,
      want: () => (asked?.choice.kind === 'screens' ? asked.choice : null),
      why: window.innerWidth < PHONE_WIDTH ? '' : oneHead ? "This desktop's display has one head (a virtual machine's), so it shows on one screen."
        : keeps ? 'This desktop keeps its own size, so it has one screen.' : '',
      heads: heads > 1,
    }),
    addScreen: () => screens.add(),
  });
  const onResize = () => { if (multi()) requestAnimationFrame(apply); };
  window.addEventListener('resize', onResize);
  apply();
  answers(rfb, (status) => {
    const a = asked;
    if ((status === 0 || status === 4) && a?.choice.kind === 'screens') menu?.settled();
    if (status > 0 && status !== 4 && a) {
      if (a.choice.kind === 'screens') {
        menu?.refused(a.choice, status);
      } else if (a.choice.kind === 'fixed' && status !== 1) {
        menu?.refused(a.choice, status);
      } else {
        // The server takes no size at all (or not even the window's):
        // the desktop keeps its own, scaled to the window.
        keeps = true;
        apply();
      }
    }
    menu?.changed();
  });
  rfb.addEventListener('connect', () => apply());
  return {
    zoomed(on) {
      zoomed = on;
      apply();
    },
    ended(text) { screens?.close(text); },
    close() {
      window.removeEventListener('resize', onResize);
      screens?.stop();
      menu?.close();
    },
  };
}
