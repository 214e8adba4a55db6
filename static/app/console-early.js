// The console's websocket, opened as the page starts: the console page
// names the VNC websocket it will most likely open in
// <meta name="corral-early-console"> and loads this module async, with no
// imports, so the socket (and the portal's dial of the desktop behind it)
// is under way while the page's modules load and /connect answers,
// instead of after both. What the desktop sends before noVNC is ready is
// kept and handed to it in order. An unused socket is closed.
//
// The RFB handshake's first steps are the same on every VNC console: the
// portal's screen hub (rfb/client.go) offers version 3.8 and the one
// security type None, and noVNC answers them as STEPS has it, ending with
// a shared ClientInit. The early socket answers them itself as they come,
// while the page's modules load, instead of noVNC one round trip each
// through a busy page once it is ready; noVNC then reads the exchange from
// its start and its own answers, the same bytes, are not sent again
// (Replaying). Anything else the desktop's side says is left to noVNC.

const meta = document.querySelector('meta[name="corral-early-console"]');
const query = new URLSearchParams(window.location.search);
const wanted = query.get('protocol');
// UNUSED_MS is how long a socket nobody took stays open.
const UNUSED_MS = 15000;

let early = null; // { path, ws, pending, timer, handshake }

const bytes = (text) => new TextEncoder().encode(text);

// STEPS are the hub's handshake messages and noVNC's answers to them
// (noVNC 1.7: its version for 3.8, the first security type it supports
// in the server's order, ClientInit with shared true: new RFB(el, ws, {})).
const STEPS = [
  { hear: bytes('RFB 003.008\n'), say: bytes('RFB 003.008\n') },
  { hear: Uint8Array.of(1, 1), say: Uint8Array.of(1) },
  { hear: Uint8Array.of(0, 0, 0, 0), say: Uint8Array.of(1) },
];

// Handshake answers STEPS on ws as the desktop's side sends them, until
// something else comes or it is stopped; said lists what it sent.
class Handshake {
  constructor(ws) {
    this.ws = ws;
    this.step = 0;
    this.at = 0; // bytes of the step's message heard so far
    this.on = true;
    this.said = [];
  }

  hear(data) {
    if (!this.on || typeof data === 'string') return;
    for (const b of new Uint8Array(data)) {
      const step = STEPS[this.step];
      if (!step || b !== step.hear[this.at]) {
        this.on = false;
        return;
      }
      if (++this.at < step.hear.length) continue;
      this.ws.send(step.say);
      this.said.push(step.say);
      this.step++;
      this.at = 0;
      if (this.step === STEPS.length) performance.measure('rfb-early-handshake');
    }
  }
}

// A screen window (vnc-screens.js) joins beside its console's own
// connection: the page's plain one would take that over.
if (meta?.content && (!wanted || wanted === 'vnc') && !query.get('screen')) {
  const url = new URL(meta.content, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(url.href, ['binary']);
  ws.binaryType = 'arraybuffer';
  const pending = [];
  const handshake = new Handshake(ws);
  ws.addEventListener('message', (ev) => {
    pending.push(ev);
    handshake.hear(ev.data);
  });
  early = { path: meta.content, ws, pending, handshake, timer: setTimeout(() => dropEarly(), UNUSED_MS) };
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
  e.handshake.on = false; // noVNC answers what comes from now on
  if (e.ws.readyState !== WebSocket.CONNECTING && e.ws.readyState !== WebSocket.OPEN) return null;
  return { ws: e.ws, channel: new Replaying(e.ws, e.pending, e.handshake.said) };
}

// EARLY_MISMATCH is the close code of an early socket whose handshake
// answer noVNC gave otherwise (console-vnc.js reconnects on it).
export const EARLY_MISMATCH = 4001;

const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

// Replaying is a WebSocket as noVNC's Websock.attach uses one (send,
// close, binaryType, the on* handlers, protocol, readyState), whose
// onmessage first gets the messages that arrived before it was set, after
// the caller's current task (noVNC sets it inside new RFB, before it has
// read readyState), then each as it comes. noVNC's first sends are its
// answers to the handshake the early socket answered already (said): each
// is dropped when it is the same bytes; one that is not ends the socket
// (the desktop's side has the other answer), and the page connects anew.
class Replaying {
  constructor(ws, pending, said) {
    this._ws = ws;
    this._pending = pending;
    this._said = said.slice();
    this._handler = null;
    ws.addEventListener('message', () => { if (this._handler) this._flush(); });
  }

  _flush() {
    // The early listener (above, in the module) has queued the event.
    while (this._pending.length) this._handler(this._pending.shift());
  }

  send(data) {
    const said = this._said.shift();
    if (!said) {
      this._ws.send(data);
    } else if (!same(said, new Uint8Array(data.buffer || data, data.byteOffset || 0, data.byteLength))) {
      this._said.length = 0;
      this._ws.close(EARLY_MISMATCH, "The console's first exchange with the desktop went wrong.");
    }
  }

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
