// The console's speaker: the desktop's sound, sent by the portal as Opus
// packets on /ws/audio (a first text message says the codec, rate,
// channels and frame length), decoded with WebCodecs' AudioDecoder and
// played with Web Audio, a few tens of milliseconds behind the desktop.
// It starts off (browsers refuse sound before a click), remembers the
// user's choice in this browser, and opens no socket while off.
const btn = document.getElementById('audio-toggle');
const KEY = 'corral.audio';
const LEAD = 0.03; // seconds queued ahead of the output: room for jitter
const MAX_BEHIND = 0.1; // more queued than this and packets are skipped

let player = null;

function wsURL() {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${btn.dataset.audio}`;
}

function show(state, title) {
  btn.dataset.state = state;
  btn.setAttribute('aria-pressed', String(state === 'on'));
  btn.textContent = state === 'on' ? 'Sound on' : 'Sound';
  if (title) btn.title = title;
}

// Player plays one audio websocket until stopped.
class Player {
  constructor(onEnd) {
    this.onEnd = onEnd;
    this.ctx = new AudioContext({ latencyHint: 'interactive', sampleRate: 48000 });
    this.analyser = this.ctx.createAnalyser(); // the level meter (and tests) read it
    this.analyser.fftSize = 2048;
    this.analyser.smoothingTimeConstant = 0; // the level of now, not of the last second
    this.analyser.connect(this.ctx.destination);
    this.next = 0;
    this.ts = 0;
    this.frameUs = 20000;
    this.decoder = new AudioDecoder({
      output: (data) => this.play(data),
      error: () => this.stop("The desktop's sound could not be decoded; turn it on again."),
    });
    this.ws = new WebSocket(wsURL());
    this.ws.binaryType = 'arraybuffer';
    this.ws.onmessage = (e) => this.message(e.data);
    this.ws.onclose = (e) => this.stop(e.reason || (this.hello
      ? 'The sound stopped: the connection to the portal closed. Turn it on again.'
      : "The portal did not start the sound: reload the page; if that does not help, stop and start the desktop (its sound server may have stopped)."));
  }

  message(data) {
    if (typeof data === 'string') {
      let hello;
      try { hello = JSON.parse(data); } catch { hello = {}; }
      if (hello.codec !== 'opus') {
        this.stop('The portal sent sound this page cannot play.');
        return;
      }
      this.hello = hello;
      this.frameUs = (hello.frameMs || 20) * 1000;
      this.decoder.configure({ codec: 'opus', sampleRate: hello.sampleRate, numberOfChannels: hello.channels });
      return;
    }
    if (this.decoder.state !== 'configured') return;
    this.decoder.decode(new EncodedAudioChunk({ type: 'key', timestamp: this.ts, data }));
    this.ts += this.frameUs;
  }

  play(data) {
    const now = this.ctx.currentTime;
    if (this.next > now + MAX_BEHIND) { // fell behind (a burst after a stall): skip to stay live
      data.close();
      return;
    }
    const n = data.numberOfFrames;
    const buf = this.ctx.createBuffer(data.numberOfChannels, n, data.sampleRate);
    for (let c = 0; c < data.numberOfChannels; c++) {
      const plane = new Float32Array(n);
      data.copyTo(plane, { planeIndex: c, format: 'f32-planar' });
      buf.copyToChannel(plane, c);
    }
    data.close();
    // First packet or an underrun: start again LEAD ahead.
    if (this.next < now) this.next = now + LEAD;
    const src = this.ctx.createBufferSource();
    src.buffer = buf;
    src.connect(this.analyser);
    src.start(this.next);
    this.next += buf.duration;
  }

  stop(reason) {
    if (this.stopped) return;
    this.stopped = true;
    this.ws.onclose = null;
    this.ws.close();
    if (this.decoder.state !== 'closed') this.decoder.close();
    this.ctx.close();
    this.onEnd(reason);
  }
}

function start() {
  if (player) return;
  player = new Player((reason) => {
    player = null;
    window.corralAudio = null;
    show('off', reason);
  });
  window.corralAudio = player;
  show('on', 'Sound is on: press to mute');
  meter();
}

function stop() {
  if (!player) return;
  const p = player;
  player = null;
  p.onEnd = () => {};
  p.stop('');
  window.corralAudio = null;
  show('off', "Play the desktop's sound here");
}

// meter shows the sound's level on the button while it plays.
function meter() {
  const bins = new Uint8Array(256);
  const tick = () => {
    if (!player) {
      btn.style.removeProperty('--level');
      return;
    }
    player.analyser.getByteTimeDomainData(bins);
    let peak = 0;
    for (const v of bins) peak = Math.max(peak, Math.abs(v - 128));
    btn.style.setProperty('--level', String(Math.min(1, peak / 64)));
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}

if (!('AudioDecoder' in window) || !('AudioContext' in window)) {
  btn.disabled = true;
  show('off', "This browser cannot play the desktop's sound (no WebCodecs): use a current Chrome, Edge, Firefox or Safari.");
} else {
  btn.addEventListener('click', () => {
    if (player) {
      stop();
      localStorage.setItem(KEY, 'off');
    } else {
      start();
      localStorage.setItem(KEY, 'on');
    }
  });
  if (localStorage.getItem(KEY) === 'on') {
    // Browsers allow sound only after a gesture: the first click or key
    // anywhere turns it back on.
    show('off', 'Sound comes back on at your first click or key');
    const resume = (e) => {
      if (e.target !== btn) start();
      document.removeEventListener('pointerdown', resume, true);
      document.removeEventListener('keydown', resume, true);
    };
    document.addEventListener('pointerdown', resume, true);
    document.addEventListener('keydown', resume, true);
  } else {
    show('off');
  }
}
