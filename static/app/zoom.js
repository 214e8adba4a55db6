// Pinch zoom of a console's view, for phones and tablets: two fingers
// pinching zoom the desktop as this page shows it (the remote desktop keeps
// its resolution), two fingers dragging pan the zoomed view, one finger
// stays the mouse (tap = click, drag = drag), and the Fit button (on the
// screen while zoomed) goes back to the whole desktop. A pinch zooms about
// the fingers and follows them, as a photo does on a phone.
//
// The view is the stage: the element holding the console's canvas. Where
// it is on the screen is (x, y) + z * (its place at fit), and the clients
// map a touch to the desktop by the canvas's on-screen box:
//   - 'size' (noVNC): the stage is made z times the screen's size and
//     noVNC scales the desktop to fit it, so its own scale (which maps
//     pointer positions) includes the zoom; the caller stops resizing the
//     remote desktop to the stage while zoomed (zoomed(on)).
//   - 'transform' (IronRDP): the stage is scaled with a CSS transform;
//     IronRDP maps the pointer by the canvas's bounding box, which
//     includes it.
// noVNC reads touches itself (its GestureHandler: tap, drag, two-finger
// scroll, and a pinch it would send as Ctrl+wheel): its pinch, and its
// two-finger drag while zoomed, are taken from it here, before it sees
// them. IronRDP reads no touches, so its two-finger gestures are read here
// from the touches, and those that are not the view's (a two-finger tap, a
// two-finger drag at fit) are handed to the caller (console-rdp-touch.js).

const maxZoom = 6;
const snap = 1.1; // a pinch that ends below this goes back to fit
const still = 12; // px two fingers may move and still be a tap
const tapTime = 600; // ms two fingers may rest and still be a tap

// attachZoom zooms stage inside screen. opts: mode ('size' or
// 'transform'), canvas() the desktop's canvas in the stage, gestures (true
// when noVNC's gesture events decide what a two-finger touch is),
// zoomed(on) called when the view leaves or comes back to fit, and, without
// gestures, tap2(at) for a two-finger tap and scroll(at, dx, dy) for each
// move of a two-finger drag that does not pan the view (at: the fingers'
// middle in client coordinates; dx, dy: how far it moved). It returns
// { fit(), zoomTo(z), close(), get zoom() }; a "Zoom 1:1" button offers
// the desktop's real size while the fit shrinks it.
export function attachZoom(screen, stage, opts = {}) {
  const mode = opts.mode || 'transform';
  const view = { z: 1, x: 0, y: 0 };
  const touches = new Map(); // identifier -> { x, y } in the screen's coordinates
  let pinch = null; // the two-finger gesture under way
  let swallow = false; // noVNC's gesture events are ours until its gestureend

  stage.style.transformOrigin = '0 0';
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'zoom-fit';
  button.dataset.testid = 'zoom-fit';
  button.title = 'Show the whole desktop again';
  button.hidden = true;
  button.addEventListener('click', () => fit());
  // The other choice: the desktop at its real size (one desktop pixel per
  // CSS pixel), offered while the fit shrinks it (a phone's 1024 px desktop).
  // It goes in the console bar's slot where the page has one: at fit the
  // desktop fills a phone's screen, and a button over it hid its corner.
  const one = document.createElement('button');
  one.type = 'button';
  one.className = 'zoom-fit zoom-one';
  one.dataset.testid = 'zoom-actual';
  one.title = 'Show the desktop at its real size; pan with two fingers';
  // "Zoom" gives way on the narrowest phones, so the status keeps its words.
  const word = document.createElement('span');
  word.className = 'zoom-word';
  word.textContent = 'Zoom ';
  one.append(word, '1:1');
  one.setAttribute('aria-label', 'Zoom 1:1');
  one.hidden = true;
  one.addEventListener('click', () => zoomTo(actual()));
  screen.append(button);
  (document.getElementById('zoom-slot') || screen).append(one);

  // content is where the desktop's canvas is on the screen at fit (a
  // client may letterbox it), found by undoing the view on its box.
  let content = null;
  function measure() {
    const c = (opts.canvas?.() || stage).getBoundingClientRect();
    const r = screen.getBoundingClientRect();
    if (c.width <= 0 || c.height <= 0) return;
    content = {
      x0: (c.left - r.left - view.x) / view.z, x1: (c.right - r.left - view.x) / view.z,
      y0: (c.top - r.top - view.y) / view.z, y1: (c.bottom - r.top - view.y) / view.z,
    };
  }
  // keep moves the zoomed desktop no further than its edges allow: it
  // covers the screen along a side where it is larger, and stays whole on
  // the screen where it is smaller.
  function keep(at, size, lo, hi) {
    const z = view.z;
    if (z * (hi - lo) <= size) return Math.min(size - z * hi, Math.max(-z * lo, at));
    return Math.min(-z * lo, Math.max(size - z * hi, at));
  }

  function apply() {
    const w = screen.clientWidth;
    const h = screen.clientHeight;
    const c = content || { x0: 0, x1: w, y0: 0, y1: h };
    view.x = view.z > 1 ? keep(view.x, w, c.x0, c.x1) : 0;
    view.y = view.z > 1 ? keep(view.y, h, c.y0, c.y1) : 0;
    const on = view.z > 1;
    if (on && screen.dataset.zoomed !== 'true') opts.zoomed?.(true);
    if (mode === 'size') {
      stage.style.width = on ? `${view.z * w}px` : '100%';
      stage.style.height = on ? `${view.z * h}px` : '100%';
      stage.style.transform = on ? `translate(${view.x}px, ${view.y}px)` : '';
    } else {
      stage.style.transform = on ? `translate(${view.x}px, ${view.y}px) scale(${view.z})` : '';
    }
    if (!on && screen.dataset.zoomed === 'true') opts.zoomed?.(false);
    screen.dataset.zoomed = String(on);
    screen.dataset.zoom = view.z.toFixed(2);
    button.hidden = !on;
    button.textContent = `Fit · ${Math.round(view.z * 100)}%`;
    offerOne();
  }

  function fit() {
    Object.assign(view, { z: 1, x: 0, y: 0 });
    apply();
  }

  // actual is the zoom that shows the desktop at its real size, from fit.
  function actual() {
    const c = opts.canvas?.();
    const shown = c?.getBoundingClientRect().width || 0;
    return c && shown > 0 ? (c.width / shown) * view.z : 1;
  }
  function zoomTo(z) {
    measure();
    Object.assign(view, { z: Math.min(maxZoom, Math.max(1, z)), x: 0, y: 0 });
    apply();
  }
  // offerOne shows "Zoom 1:1" at fit while the fit shrinks the desktop.
  function offerOne() { one.hidden = view.z > 1 || actual() < 1.3; }
  const offering = setInterval(offerOne, 1000);

  // local turns a touch's page position into the screen's coordinates.
  function local(t) {
    const r = screen.getBoundingClientRect();
    return { x: t.clientX - r.left, y: t.clientY - r.top };
  }
  function pair() {
    const [a, b] = [...touches.values()];
    return { m: { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 }, d: Math.hypot(a.x - b.x, a.y - b.y) };
  }
  // client turns a point in the screen's coordinates back into the page's.
  function client(p) {
    const r = screen.getBoundingClientRect();
    return { x: p.x + r.left, y: p.y + r.top };
  }

  // follow zooms and pans so that the point of the desktop that was
  // between the fingers when they came down stays between them.
  function follow() {
    const { m, d } = pair();
    const z = Math.min(maxZoom, Math.max(1, pinch.z0 * d / Math.max(1, pinch.d0)));
    view.z = z;
    view.x = m.x - z * (pinch.m0.x - pinch.x0) / pinch.z0;
    view.y = m.y - z * (pinch.m0.y - pinch.y0) / pinch.z0;
    apply();
  }

  const onStart = (ev) => {
    for (const t of ev.changedTouches) touches.set(t.identifier, local(t));
    if (touches.size === 2) {
      measure();
      const { m, d } = pair();
      pinch = { m0: m, d0: d, z0: view.z, x0: view.x, y0: view.y, ours: false, decided: false, at: m, t0: performance.now() };
    } else {
      pinch = null; // one finger is the mouse; three are not a zoom
    }
    if (!opts.gestures && touches.size >= 2) ev.preventDefault();
  };
  const onMove = (ev) => {
    for (const t of ev.changedTouches) if (touches.has(t.identifier)) touches.set(t.identifier, local(t));
    if (!pinch || touches.size !== 2) return;
    if (!opts.gestures) {
      ev.preventDefault();
      if (!pinch.decided) {
        const { m, d } = pair();
        const moved = Math.hypot(m.x - pinch.m0.x, m.y - pinch.m0.y);
        const spread = Math.abs(d - pinch.d0);
        if (Math.max(moved, spread) < still) return;
        pinch.decided = true;
        pinch.ours = spread > moved || view.z > 1;
      }
      if (!pinch.ours) {
        // A drag at fit: the desktop's to scroll.
        const { m } = pair();
        opts.scroll?.(client(m), m.x - pinch.at.x, m.y - pinch.at.y);
        pinch.at = m;
      }
    }
    if (pinch.ours) follow();
  };
  const onEnd = (ev) => {
    for (const t of ev.changedTouches) touches.delete(t.identifier);
    if (touches.size < 2 && pinch) {
      if (pinch.ours && view.z < snap) fit();
      // Two fingers that came down and lifted without moving: a tap.
      if (ev.type === 'touchend' && !opts.gestures && !pinch.decided && performance.now() - pinch.t0 < tapTime) opts.tap2?.(client(pinch.m0));
      pinch = null;
    }
  };
  // noVNC says what a two-finger touch is once it has moved enough: a
  // pinch is always ours; a drag is ours (a pan) while zoomed, else it
  // scrolls the desktop as noVNC does.
  const onGesture = (ev) => {
    const kind = ev.detail?.type;
    if (ev.type === 'gesturestart' && pinch && (kind === 'pinch' || (kind === 'twodrag' && view.z > 1))) {
      pinch.ours = true;
      swallow = true;
      follow();
    }
    if (!swallow || (kind !== 'pinch' && kind !== 'twodrag')) return;
    ev.stopImmediatePropagation();
    if (ev.type === 'gestureend') swallow = false;
  };

  const capture = { capture: true, passive: false };
  screen.addEventListener('touchstart', onStart, capture);
  screen.addEventListener('touchmove', onMove, capture);
  screen.addEventListener('touchend', onEnd, capture);
  screen.addEventListener('touchcancel', onEnd, capture);
  const gestures = ['gesturestart', 'gesturemove', 'gestureend'];
  if (opts.gestures) for (const g of gestures) stage.addEventListener(g, onGesture, true);
  // A smaller or larger screen (the keyboard row, a turned phone) keeps
  // the zoom; the view is kept inside it.
  const resized = new ResizeObserver(() => { if (view.z > 1) { measure(); apply(); } });
  resized.observe(screen);

  return {
    fit,
    get zoom() { return view.z; },
    zoomTo,
    close() {
      clearInterval(offering);
      one.remove();
      resized.disconnect();
      screen.removeEventListener('touchstart', onStart, capture);
      screen.removeEventListener('touchmove', onMove, capture);
      screen.removeEventListener('touchend', onEnd, capture);
      screen.removeEventListener('touchcancel', onEnd, capture);
      for (const g of gestures) stage.removeEventListener(g, onGesture, true);
      button.remove();
      delete screen.dataset.zoomed;
      delete screen.dataset.zoom;
    },
  };
}
