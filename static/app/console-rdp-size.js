// The RDP console's Size choice (size.js) through IronRDP: Fit asks the
// server for the window's size through display control and scales the
// session to the window (ScreenScale.Fit); a fixed size asks for that
// size and scales it; Actual size asks nothing and shows the session unscaled
// (ScreenScale.Real). A server that keeps its size (the platform says so:
// the local desktops' freerdp-shadow) is scaled instead, as the list's
// words say. RDP's display control has no refusal to read: the session is
// the size the server gives.
import { attachSize } from './size.js';

// IronRDP's ScreenScale.
const FIT = 1;
const REAL = 3;

// attachRDPSize follows the user's choice for irgui (IronRDP's user
// interaction) in screen; canvas returns the session's canvas; keeps: the
// platform says the server keeps its size. It returns { desktopSize(),
// follow(), close() }: desktopSize is the size to connect with, follow is
// called when the window or the session changes.
export function attachRDPSize(irgui, screen, canvas, { keeps = false } = {}) {
  let choice = { kind: 'fit' };
  let closed = false;
  let timer;
  const fixed = () => choice.kind === 'fixed' && !keeps;
  const windowSize = () => ({ width: screen.clientWidth & ~1, height: screen.clientHeight & ~1 });
  function follow() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (closed || screen.clientWidth <= 0) return;
      const scale = () => { if (!closed) irgui.setScale(choice.kind === 'actual' ? REAL : FIT); };
      // A server that keeps its size is only scaled: asked for another
      // size, IronRDP stretches its canvas to that size at once and
      // leaves it so until the next rescale (freerdp-shadow never answers
      // with a size): after Actual size then Fit the session showed out of shape
      // for a second, and once in four runs for over 10 s.
      if (keeps || choice.kind === 'actual') {
        scale();
        return;
      }
      const s = fixed() ? { width: choice.w, height: choice.h } : windowSize();
      try {
        irgui.resize(s.width, s.height);
      } catch { /* no session yet, or the server cannot resize */ }
      // IronRDP sizes its canvas to the asked size at once: scale it
      // again once the server has answered, and once more for a server
      // that answers late.
      timer = setTimeout(() => { scale(); timer = setTimeout(scale, 1500); }, 700);
    }, 300);
  }
  const menu = attachSize(document.querySelector('.size-menu'), {
    apply(c) {
      choice = c;
      follow();
    },
    resizable: () => !keeps,
    size: () => {
      const c = canvas();
      return c?.width ? { w: c.width, h: c.height } : null;
    },
  });
  return {
    desktopSize() {
      const s = fixed() ? { width: choice.w, height: choice.h } : windowSize();
      return { width: Math.max(640, s.width), height: Math.max(480, s.height) };
    },
    follow,
    close() {
      closed = true;
      clearTimeout(timer);
      menu.close();
    },
  };
}
