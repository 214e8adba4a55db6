// Playback of a console recording (views/recordings.templ, Playback): a
// terminal or serial console's asciicast in asciinema-player, a VNC
// session's corral-rfb-v1 recording fed to noVNC through a stand-in for its
// websocket. Both get the same controls: play/pause, speed and a timeline.
// #player's data-state says where playback is (loading, ready, playing,
// paused, ended, error), for people and tests alike.

const el = document.getElementById('player');
const playBtn = document.getElementById('play');
const speedSel = document.getElementById('speed');
const timeline = document.getElementById('timeline');
const timeText = document.getElementById('time');
const errorText = document.getElementById('player-error');
const noteText = document.getElementById('player-note');

function state(s) { el.dataset.state = s; playBtn.textContent = s === 'playing' ? 'Pause' : 'Play'; }

// clock says sec as m:ss, or m:ss.t (tenths) in a recording shorter than
// ten seconds, which whole seconds would show as 0:00 / 0:00.
function clock(sec, tenths) {
  const t = Math.max(0, Math.floor(sec * 10 + 1e-6));
  const s = Math.floor(t / 10);
  const whole = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  return tenths ? `${whole}.${t % 10}` : whole;
}

function fail(msg) {
  state('error');
  errorText.textContent = msg;
  errorText.hidden = false;
}

// controls wires the page's controls to a player: {duration (seconds),
// position(), play(), pause(), seek(sec), setSpeed(x)}.
function controls(p) {
  // A session may idle after its last event: the timeline runs to its end.
  p.duration = Math.max(p.duration, Number(el.dataset.duration) || 0);
  // The timeline's steps are tenths: its end is the duration rounded up,
  // and any position from the last step on is the end.
  const end = Math.ceil(p.duration * 10) / 10;
  timeline.max = String(end);
  timeline.disabled = false;
  playBtn.disabled = false;
  const show = (pos) => {
    // At the end the thumb is at the end, though the last step rounds up.
    if (!timeline.matches(':active')) timeline.value = String(pos >= p.duration ? end : pos);
    const tenths = p.duration < 10;
    timeText.textContent = `${clock(pos, tenths)} / ${clock(p.duration, tenths)}`;
  };
  show(0);
  state('ready');
  playBtn.addEventListener('click', () => {
    if (el.dataset.state === 'playing') {
      p.pause();
      state('paused');
    } else {
      if (el.dataset.state === 'ended') p.seek(0);
      p.play();
      state('playing');
    }
  });
  speedSel.addEventListener('change', () => p.setSpeed(Number(speedSel.value)));
  timeline.addEventListener('change', async () => {
    const t = Math.min(Number(timeline.value), p.duration);
    const atEnd = Number(timeline.value) >= end - 0.05;
    await p.seek(atEnd ? p.duration : t);
    show(t);
    if (atEnd) {
      p.pause();
      state('ended');
    }
    else if (el.dataset.state === 'ended') state('paused');
  });
  setInterval(async () => {
    const pos = await p.position();
    show(pos);
    if (el.dataset.state === 'playing' && pos >= p.duration) {
      p.pause();
      state('ended');
    }
  }, 200);
}

// terminalPlayer plays an asciicast with asciinema-player (a classic
// script: window.AsciinemaPlayer).
function terminalPlayer(text) {
  const lines = text.trimEnd().split('\n');
  let duration = 0;
  for (let i = lines.length - 1; i > 0; i--) {
    try { duration = JSON.parse(lines[i])[0]; break; } catch { /* a cut-short line */ }
  }
  let speed = 1;
  let player = null;
  let playing = false;
  let ended = false; // the player reached the last event
  const make = (startAt, autoPlay) => {
    if (player) player.dispose();
    el.replaceChildren();
    ended = false;
    player = window.AsciinemaPlayer.create({ data: text }, el, {
      speed, startAt, autoPlay, controls: false, fit: 'width', preload: true,
    });
    player.addEventListener('ended', () => { ended = true; });
  };
  make(0, false);
  const p = {
    duration,
    // After the last event the session may have idled: that is the end.
    position: async () => (ended ? p.duration : (await player.getCurrentTime()) || 0),
    play() { playing = true; ended = false; player.play(); },
    pause() { playing = false; player.pause(); },
    async seek(t) { ended = false; await player.seek(Math.min(t, duration)); },
    async setSpeed(x) { const t = await player.getCurrentTime(); speed = x; make(t, playing); },
  };
  return p;
}

// parseRFB reads a corral-rfb-v1 recording (see relay/record_rfb.go) into
// the server's records: [{at: ms, data: Uint8Array}].
function parseRFB(buf) {
  const magic = 'CORRAL-RFB 1\n';
  const u8 = new Uint8Array(buf);
  const dv = new DataView(buf);
  if (new TextDecoder().decode(u8.subarray(0, magic.length)) !== magic) throw new Error('not a corral-rfb-v1 recording');
  let off = magic.length + 4 + dv.getUint32(magic.length);
  const out = [];
  while (off + 9 <= u8.length) {
    const dir = u8[off];
    const at = dv.getUint32(off + 1);
    const n = dv.getUint32(off + 5);
    if (off + 9 + n > u8.length) break; // cut short
    if (dir === 0x53) out.push({ at, data: u8.subarray(off + 9, off + 9 + n) });
    off += 9 + n;
  }
  return out;
}

// RecordingSocket stands in for the websocket noVNC reads: it is open from
// the start, hands noVNC the recorded server bytes when fed, and drops what
// noVNC sends (the recorded server already answered it).
class RecordingSocket {
  constructor() {
    this.binaryType = 'arraybuffer';
    this.protocol = 'binary';
    this.readyState = 'open';
    this.onopen = null;
    this.onmessage = null;
    this.onclose = null;
    this.onerror = null;
    this.queue = [];
  }

  send() {}

  close() {
    if (this.readyState === 'closed') return;
    this.readyState = 'closed';
    if (this.onclose) this.onclose({ code: 1000, reason: '', wasClean: true });
  }

  feed(data) {
    if (data) this.queue.push(data);
    if (typeof this.onmessage !== 'function') return; // noVNC has not attached yet
    for (const d of this.queue.splice(0)) {
      if (this.readyState !== 'open') return;
      this.onmessage({ data: d.slice().buffer });
    }
  }
}

// posterAt is the ms up to which the player delivers before Play, so the
// page never opens on an empty canvas: through the first record that
// carries pixels (the desktop's first full frame, after the handshake's
// small ones) and what follows it without a pause, at most 300 ms more
// (and then the rest of the update it ends in: vncPlayer). 0 when no
// record carries pixels.
function posterAt(records) {
  const first = records.find((r) => r.data.length >= 1024);
  if (!first) return 0;
  let at = first.at;
  for (const r of records) {
    if (r.at <= at) continue;
    if (r.at - at > 100 || r.at > first.at + 300) break;
    at = r.at;
  }
  return at;
}

// stillVideo stands in for noVNC's H.264 decoder (RFB encoding 50) where
// the browser has no WebCodecs, which that decoder needs: noVNC 1.7 would
// fail the whole playback at the recording's first video rectangle (a
// live console never gets video there: noVNC does not ask for it). It
// reads each video rectangle past and draws nothing, so the screen holds
// its last picture while the desktop moved, until the exact screen the
// hub sends after each motion; the first one it skips says so under the
// player. It relies on noVNC's decoders table (private; noVNC is pinned).
function stillVideo(rfb) {
  if (window.VideoDecoder || !rfb._decoders?.[50]) return;
  rfb._decoders[50] = {
    decodeRect(x, y, w, h, sock) {
      if (sock.rQwait('h264 header', 8)) return false;
      const length = sock.rQshift32();
      sock.rQshift32(); // flags
      if (sock.rQwait('h264 payload', length, 8)) return false;
      sock.rQskipBytes(length);
      if (noteText.hidden) {
        noteText.textContent = 'This browser cannot play video (it has no WebCodecs): where the desktop moved, the recording shows the screen still until the motion ended. A browser with WebCodecs (a recent Chrome, Edge, Firefox or Safari) plays it all.';
        noteText.hidden = false;
        el.dataset.video = 'still';
      }
      return true;
    },
  };
}

// vncPlayer replays an RFB recording into noVNC; seeking back replays from
// the start, as fast as noVNC takes it. Before Play (and after a seek to the
// start) it shows the session's first frame.
async function vncPlayer(buf) {
  const { default: RFB } = await import(el.dataset.novnc);
  const records = parseRFB(buf);
  const duration = records.length ? records[records.length - 1].at / 1000 : 0;
  let poster = posterAt(records);
  let rfb = null;
  let sock = null;
  let next = 0; // index of the next record to deliver
  let pos = 0; // ms delivered up to
  let speed = 1;
  let playing = false;
  let wall = 0; // performance.now() when pos was last set while playing
  let base = 0;
  const reset = () => {
    if (rfb) rfb.disconnect();
    el.replaceChildren();
    sock = new RecordingSocket();
    rfb = new RFB(el, sock, { shared: true, credentials: { password: 'recorded' } });
    rfb.viewOnly = true;
    rfb.scaleViewport = true;
    stillVideo(rfb);
    rfb.addEventListener('credentialsrequired', () => rfb.sendCredentials({ username: '', password: 'recorded' }));
    setTimeout(() => sock.feed(), 0);
    next = 0;
    pos = 0;
  };
  const deliver = async (ms) => {
    let fed = 0;
    while (next < records.length && records[next].at <= ms) {
      sock.feed(records[next].data);
      fed += records[next].data.length;
      next++;
      if (fed > 4 << 20) { // let noVNC draw before feeding more
        fed = 0;
        await new Promise((r) => setTimeout(r, 0));
      }
    }
    pos = ms;
  };
  const now = () => (playing ? base + (performance.now() - wall) * speed : pos);
  setInterval(() => { if (playing) deliver(now()); }, 40);
  reset();
  await deliver(poster);
  // The update the poster ends in may go on in the records after it: the
  // relay reads the desktop's stream in pieces, which a busy machine
  // records apart. They go too, whatever their time, until noVNC holds
  // the whole update (once it has read what it was fed: reset's feed).
  await new Promise((r) => setTimeout(r, 0));
  while (next < records.length && rfb._FBU.rects > 0) await deliver(records[next].at);
  poster = pos;
  const p = {
    duration,
    position: async () => Math.min(now(), p.duration * 1000) / 1000,
    play() { base = pos; wall = performance.now(); playing = true; },
    pause() { deliver(now()); playing = false; },
    async seek(t) {
      const ms = t * 1000;
      if (ms < pos) reset();
      await deliver(Math.max(ms, poster));
      base = ms;
      wall = performance.now();
    },
    setSpeed(x) { base = now(); wall = performance.now(); speed = x; },
  };
  return p;
}

async function main() {
  let res;
  try {
    res = await fetch(el.dataset.src, { credentials: 'same-origin' });
  } catch {
    fail('The recording could not be fetched.');
    return;
  }
  if (!res.ok) {
    let msg = `The recording could not be fetched (${res.status}).`;
    try { msg = (await res.json()).error || msg; } catch { /* not JSON */ }
    fail(msg);
    return;
  }
  try {
    const player = el.dataset.kind === 'vnc' ? await vncPlayer(await res.arrayBuffer()) : terminalPlayer(await res.text());
    controls(player);
  } catch (err) {
    fail(`The recording cannot be played: ${err.message}`);
  }
}

main();
