// The console's websocket, opened as the page starts: the console page
// names the VNC websocket it will most likely open in
// <meta name="corral-early-console"> and loads this module async, with no
// imports, so the socket (and the portal's dial of the desktop behind it)
// is under way while the page's modules load and /connect answers,
// instead of after both. What the desktop sends before noVNC is ready is
// kept and handed to it in order. An unused socket is closed.

const meta = document.querySelector('meta[name="corral-early-console"]');
const query = new URLSearchParams(window.location.search);
const wanted = query.get('protocol');
// UNUSED_MS is how long a socket nobody took stays open.
const UNUSED_MS = 15000;

let early = null; // { path, ws, pending, timer }

// A screen window (vnc-screens.js) joins beside its console's own
// connection: the page's plain one would take that over.
if (meta?.content && (!wanted || wanted === 'vnc') && !query.get('screen')) {
  const url = new URL(meta.content, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(url.href, ['binary']);
  ws.binaryType = 'arraybuffer';
  const pending = [];
  ws.addEventListener('message', (ev) => pending.push(ev));
  early = { path: meta.content, ws, pending, timer: setTimeout(() => dropEarly(), UNUSED_MS) };
  performance.measure('ws-early');
}

// dropEarly closes the early socket unless it was taken.
export function dropEarly() {
  if (!early) return;
  clearTimeout(early.timer);
  early.ws.close();
  early = null;
}

// takeEarly returns the early socket of the websocket path, still
// connecting or open, as { ws, channel }: ws for the caller's own
// listeners, channel for noVNC (new RFB(el, channel)), which replays what
// arrived before it listened. It returns null when there is none (a
// reconnect, another console, or it already closed: the caller opens its
// own and reads why from that).
export function takeEarly(path) {
  const e = early;
  if (!e || e.path !== path) return null;
  clearTimeout(e.timer);
  early = null;
  if (e.ws.readyState !== WebSocket.CONNECTING && e.ws.readyState !== WebSocket.OPEN) return null;
  return { ws: e.ws, channel: new Replaying(e.ws, e.pending) };
}

// Replaying is a WebSocket as noVNC's Websock.attach uses one (send,
// close, binaryType, the on* handlers, protocol, readyState), whose
// onmessage first gets the messages that arrived before it was set, after
// the caller's current task (noVNC sets it inside new RFB, before it has
// read readyState), then each as it comes.
class Replaying {
  constructor(ws, pending) {
    this._ws = ws;
    this._pending = pending;
    this._handler = null;
    ws.addEventListener('message', () => { if (this._handler) this._flush(); });
  }

  _flush() {
    // The early listener (above, in the module) has queued the event.
    while (this._pending.length) this._handler(this._pending.shift());
  }

  send(data) { this._ws.send(data); }

  close(code, reason) { this._ws.close(code, reason); }

  get binaryType() { return this._ws.binaryType; }

  set binaryType(v) { this._ws.binaryType = v; }

  get protocol() { return this._ws.protocol; }

  get readyState() { return this._ws.readyState; }

  get onmessage() { return this._handler; }

  set onmessage(fn) {
    this._handler = null;
    queueMicrotask(() => { this._handler = fn; if (fn) this._flush(); });
  }

  get onopen() { return this._ws.onopen; }

  set onopen(fn) { this._ws.onopen = fn; }

  get onclose() { return this._ws.onclose; }

  set onclose(fn) { this._ws.onclose = fn; }

  get onerror() { return this._ws.onerror; }

  set onerror(fn) { this._ws.onerror = fn; }
}
