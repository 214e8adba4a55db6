// Touch as a mouse on an RDP console, for phones and tablets. IronRDP's
// component reads only mouse events (and the wheel) on its canvas: of a
// touch, a browser makes mouse events for a tap and nothing else, so a
// one-finger drag, a long press and two fingers would do nothing. Here the
// touches on the desktop are read instead, and the mouse goes to the
// session the way IronRDP's own mouse handling sends it: DeviceEvents
// (mouseMove, mouseButtonPressed/Released, wheelRotations) through
// Session.applyInputs, at the desktop pixel under the finger.
//   - tap: left click (a second tap close by, soon after, clicks the same
//     pixel, so that a double tap is a double click);
//   - one finger dragging: the left button held while the pointer follows;
//   - long press: right click where the finger rests;
//   - two-finger tap: right click between the fingers;
//   - two fingers dragging at fit: the wheel, where the fingers are, the
//     desktop following the fingers as a phone's page does.
// Pinch and, while zoomed, two-finger drags are the view's (zoom.js), which
// tells tap2 and scroll here about the two-finger gestures it does not take.
import { sender } from './console-rdp-keys.js';

const moveSlop = 10; // px a finger may move and still be a tap or a long press
const longPress = 700; // ms
const doubleTap = { ms: 500, px: 30 };
const wheelStep = 50; // px of a two-finger drag per wheel notch (noVNC's)
const notch = 120; // an RDP wheel notch, in its rotation units

// RDP mouse buttons, as DOM MouseEvent.button numbers (IronRDP's mapping).
const left = 0;
const right = 2;

// rdpTouch reads touches on the <iron-remote-desktop> el and sends them to
// the session that session() returns (undefined until connected), through
// the backend's DeviceEvent and InputTransaction. It returns the zoom's
// two-finger hooks { tap2(at), scroll(at, dx, dy) } and close().
export function rdpTouch(el, backend, session) {
  const { DeviceEvent } = backend;
  const send = sender(backend, session);
  const canvas = () => el.shadowRoot?.querySelector('canvas');

  // desktop maps a point on the page to the desktop pixel shown there, by
  // the canvas's on-screen box as IronRDP maps the mouse: that box holds
  // the fit (letterboxed, scaled) and the zoom's transform.
  function desktop(p, clamp = true) {
    const c = canvas();
    const r = c?.getBoundingClientRect();
    if (!r || r.width <= 0 || r.height <= 0 || !c.width || !c.height) return null;
    const x = Math.round((p.x - r.left) * c.width / r.width);
    const y = Math.round((p.y - r.top) * c.height / r.height);
    if (!clamp && (x < 0 || y < 0 || x >= c.width || y >= c.height)) return null;
    return { x: Math.min(c.width - 1, Math.max(0, x)), y: Math.min(c.height - 1, Math.max(0, y)) };
  }
  const move = (d) => DeviceEvent.mouseMove(d.x, d.y);
  const press = (b) => DeviceEvent.mouseButtonPressed(b);
  const release = (b) => DeviceEvent.mouseButtonReleased(b);
  function click(d, button) {
    send([move(d), press(button), release(button)]);
  }

  let one = null; // the one-finger touch under way
  let multi = false; // more than one finger came down since the last lift
  let lastTap = null; // { p, d, t }: where the last tap clicked
  let wheel = { x: 0, y: 0 }; // a two-finger drag's movement not yet sent

  const point = (t) => ({ x: t.clientX, y: t.clientY });
  const mine = (ev) => [...ev.changedTouches].find((t) => t.identifier === one?.id);

  function cancel() {
    if (!one) return;
    clearTimeout(one.timer);
    if (one.dragging) send([release(left)]);
    one = null;
  }

  const onStart = (ev) => {
    ev.preventDefault(); // no mouse events of the browser's own, no page gestures
    if (ev.targetTouches.length !== 1) {
      cancel();
      multi = true;
      wheel = { x: 0, y: 0 };
      return;
    }
    multi = false;
    const t = ev.changedTouches[0];
    const p = point(t);
    const d = desktop(p, false);
    if (!d) return; // on the letterbox around the desktop
    // As a click does, a touch gives the desktop the keyboard (IronRDP
    // takes keys only while its canvas has the focus).
    canvas()?.focus({ preventScroll: true });
    one = { id: t.identifier, p0: p, d0: d, dragging: false, pressed: false };
    one.timer = setTimeout(() => {
      if (!one || one.dragging) return;
      one.pressed = true; // the long press is done: lifting the finger adds nothing
      click(one.d0, right);
    }, longPress);
  };
  const onMove = (ev) => {
    ev.preventDefault();
    const t = mine(ev);
    if (!t || multi || one.pressed) return;
    const p = point(t);
    if (!one.dragging) {
      if (Math.hypot(p.x - one.p0.x, p.y - one.p0.y) < moveSlop) return;
      clearTimeout(one.timer);
      one.dragging = true;
      send([move(one.d0), press(left)]); // the button goes down where the finger did
    }
    send([move(desktop(p))]);
  };
  const onEnd = (ev) => {
    const t = mine(ev);
    if (!t) return;
    ev.preventDefault();
    clearTimeout(one.timer);
    const p = point(t);
    if (one.dragging) {
      send([move(desktop(p)), release(left)]);
    } else if (!one.pressed && ev.type === 'touchend' && !multi) {
      const now = performance.now();
      const again = lastTap && now - lastTap.t < doubleTap.ms && Math.hypot(p.x - lastTap.p.x, p.y - lastTap.p.y) < doubleTap.px;
      const d = again ? lastTap.d : one.d0;
      click(d, left);
      lastTap = { p, d, t: now };
    }
    one = null;
  };

  const opts = { passive: false };
  el.addEventListener('touchstart', onStart, opts);
  el.addEventListener('touchmove', onMove, opts);
  el.addEventListener('touchend', onEnd, opts);
  el.addEventListener('touchcancel', onEnd, opts);

  return {
    // tap2 is a two-finger tap at the page's point at: a right click (none
    // on the letterbox around the desktop).
    tap2(at) {
      const d = desktop(at, false);
      if (d) click(d, right);
    },
    // scroll turns a two-finger drag into wheel notches where the fingers
    // are: fingers going up scroll the desktop down, as on a phone.
    scroll(at, dx, dy) {
      const d = desktop(at, false);
      if (!d) return;
      wheel.x += dx;
      wheel.y += dy;
      const events = [move(d)];
      for (const [axis, vertical] of [['y', true], ['x', false]]) {
        while (Math.abs(wheel[axis]) >= wheelStep) {
          const s = Math.sign(wheel[axis]);
          events.push(DeviceEvent.wheelRotations(vertical, s * notch, 0 /* RotationUnit.Pixel: rotation units as they are */));
          wheel[axis] -= s * wheelStep;
        }
      }
      send(events);
    },
    close() {
      cancel();
      el.removeEventListener('touchstart', onStart, opts);
      el.removeEventListener('touchmove', onMove, opts);
      el.removeEventListener('touchend', onEnd, opts);
      el.removeEventListener('touchcancel', onEnd, opts);
    },
  };
}
