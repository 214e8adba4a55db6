// The VNC console's WebRTC video path: the screen hub's H.264, which
// otherwise comes over the console's websocket as RFB rectangles, comes
// on a WebRTC video track instead, for links where TCP is the bottleneck
// (loss, a long round trip). The Picture choice decides when
// (vnc-quality.js: WebRTC always, Auto and Fast on a WAN's round trip).
// Signalled over the console's own websocket as JSON text messages
// (noVNC's RFB stream is binary); the portal answers with its own
// candidates only and ignores the browser's, so the offer is sent at
// once. Input, clipboard, cursor, the tiles between motion and the
// lossless repaint after it (asked for again after a late frame:
// stillMS) stay on the websocket: each decoded video
// frame is drawn into noVNC's own screen, in turn with the tiles, so
// scaling, zoom and input work as before. The frames are read from the
// track as the browser decodes them (MediaStreamTrackProcessor, in
// Chromium); where there is none, from a hidden video element's frame
// callbacks, which a browser may run less often than it decodes (they
// follow what it paints, and the element is not painted). The portal sends the video on
// the track only once the browser reached its port; until then, and
// when the portal refuses (a screen relayed from another portal server),
// the track ends or the port cannot be reached, the video is the
// websocket's, as without WebRTC.

import { H264 } from './vnc-video.js';

// heldFrames is how many drawing steps noVNC's screen may have waiting
// (a tile's image still loading) for a video frame to be queued behind
// them: past it the frame is dropped, not held (each frame held is a
// buffer the browser's decoder waits for, and the next frame paints the
// whole screen anyway).
const heldFrames = 2;

// stillMS is how long after the track's last drawn frame the page makes
// sure the screen was painted losslessly after it. The hub repaints the
// whole screen as tiles half a second after the desktop's last change,
// over the websocket; the track's frames come another way (UDP, and
// across replicas a video link with its own queue), so on a loaded
// machine a late frame can land after that repaint and leave the still
// screen lossy for good. When the tiles drawn since the last frame cover
// less than the screen, the page asks for the whole screen once (the
// hub's repaint budget bounds it); after the hub's own repaint in time it
// asks nothing.
const stillMS = 1000;

// setupMS is how long the browser has to reach the portal's port after
// its answer: past it this page ends its peer, tells the portal, and
// says so (Chromium itself gives up on unanswered checks only after
// ~30 s, and a network that drops UDP answers none).
const setupMS = 8000;

// attachRTC prepares rfb's console (whose websocket is ws) for a WebRTC
// track, drawing its frames into noVNC's screen. It returns
// { want(on, retry), close }: want(true) offers a track once noVNC is
// connected, want(false) ends it; after a failure it is offered again
// only when retry (the user picked WebRTC). screen.dataset.rtc says
// where the video comes from ('offered', 'connected', 'off' with the
// reason in screen.dataset.rtcWhy), screen.dataset.rtcFrames how many
// frames the track drew, screen.dataset.rtcVideo their size and
// screen.dataset.rtcRepaints how often the page asked for the whole
// screen after a late frame (stillMS); a failure also shows in the
// console's notice. RFB is noVNC's class (its messages).
export function attachRTC(rfb, RFB, ws, stage, screen) {
  const none = { want() {}, close() {} };
  if (!window.RTCPeerConnection || typeof VideoFrame === 'undefined') return none; // frames are drawn as VideoFrames
  let pc = null;
  let id = 0; // the live offer's: a late word about an earlier one is not pc's
  let offers = 0;
  let video = null;
  let frames = 0;
  let wanted = false;
  let connected = false; // noVNC's
  let failed = false;
  let timer = 0;
  let still = 0; // stillMS's timer
  let tiles = 0; // the screen's pixels painted by tiles since the last frame
  let repaints = 0;
  const say = (state, why) => {
    screen.dataset.rtc = state;
    if (why) screen.dataset.rtcWhy = why;
    else delete screen.dataset.rtcWhy;
  };
  const end = (why) => {
    clearTimeout(timer);
    clearTimeout(still);
    if (pc) pc.close();
    pc = null;
    id = 0;
    if (video) video.remove();
    video = null;
    if (why) say('off', why);
  };
  // fail ends the track for why, which the console's notice shows; the
  // video goes on over the websocket.
  const fail = (why) => {
    if (!pc) return;
    failed = true;
    end(why);
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ rtc: 'stop' }));
    notice(why);
  };
  const onMessage = (ev) => {
    if (typeof ev.data !== 'string') return;
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (!pc || m.id !== id) return;
    if (m.rtc === 'answer') {
      pc.setRemoteDescription({ type: 'answer', sdp: m.sdp }).catch((err) => fail(`WebRTC: the portal's answer could not be used (${err.message}); the video comes over the console's connection.`));
    } else if (m.rtc === 'refused' || m.rtc === 'ended') {
      fail(`WebRTC: ${m.error}`);
    }
  };
  ws.addEventListener('message', onMessage);

  // noVNC's rectangles other than H.264 are the tiles: count what they
  // paint (a rectangle's decode returns true once it is drawn or queued,
  // in turn with the frames).
  const decodeRect = rfb._handleDataRect.bind(rfb);
  rfb._handleDataRect = () => {
    const { width, height, encoding } = rfb._FBU;
    const done = decodeRect();
    if (done && encoding !== H264) tiles += width * height;
    return done;
  };
  // settled asks for the whole screen when the tiles since the track's
  // last frame did not cover it (see stillMS).
  const settled = () => {
    const w = rfb._fbWidth;
    const h = rfb._fbHeight;
    if (!pc || ws.readyState !== WebSocket.OPEN || tiles >= w * h) return;
    RFB.messages.fbUpdateRequest(rfb._sock, false, 0, 0, w, h);
    repaints++;
    screen.dataset.rtcRepaints = String(repaints);
  };

  // show queues frame, a frame of the track, for noVNC's screen, in turn
  // with the tiles (its render queue draws a ready frame where it stands
  // and closes it), or closes it: a frame that does not cover the
  // screen, or one that would wait behind heldFrames steps.
  const show = (frame) => {
    const display = rfb._display;
    const w = rfb._fbWidth;
    const h = rfb._fbHeight;
    if (!display || !w || !h || frame.displayWidth < w || frame.displayHeight < h || display._renderQ.length >= heldFrames) {
      frame.close();
      return;
    }
    screen.dataset.rtcVideo = `${frame.displayWidth}x${frame.displayHeight}`; // before noVNC draws and closes it
    display.videoFrame(0, 0, w, h, { ready: true, frame, promise: Promise.resolve() });
    display.flip();
    tiles = 0;
    clearTimeout(still);
    still = setTimeout(settled, stillMS);
    frames++;
    screen.dataset.rtcFrames = String(frames);
  };
  // readTrack shows each frame of peer's track as the browser decodes it,
  // until the track ends (the peer closed) or another peer took over.
  const readTrack = async (peer, track) => {
    const reader = new MediaStreamTrackProcessor({ track, maxBufferSize: 2 }).readable.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (pc !== peer) {
        value.close();
        reader.cancel();
        return;
      }
      show(value);
    }
  };
  // watchVideo shows video's frames as its frame callbacks come (the
  // browsers without MediaStreamTrackProcessor).
  const watchVideo = (v) => {
    const draw = (now, meta) => {
      if (video !== v) return;
      show(new VideoFrame(v, { timestamp: Math.round(meta.mediaTime * 1e6) }));
      v.requestVideoFrameCallback(draw);
    };
    v.requestVideoFrameCallback(draw);
  };

  const start = async () => {
    const peer = pc = new RTCPeerConnection({ iceServers: [] }); // the portal's port only: no STUN, no TURN
    id = ++offers;
    screen.rtcPeer = peer; // for tests and the devtools
    peer.addTransceiver('video', { direction: 'recvonly' });
    peer.ontrack = (ev) => {
      if (pc !== peer) return;
      if (window.MediaStreamTrackProcessor) {
        readTrack(peer, ev.track).catch((err) => fail(`WebRTC: the track's frames could not be read (${err.message}); the video comes over the console's connection.`));
        return;
      }
      video = document.createElement('video');
      video.className = 'rtc-source';
      video.muted = true;
      video.playsInline = true;
      video.srcObject = new MediaStream([ev.track]);
      stage.append(video); // a video out of the document gets no frame callbacks
      video.play().catch(() => {});
      watchVideo(video);
    };
    peer.onconnectionstatechange = () => {
      if (pc !== peer) return;
      if (peer.connectionState === 'connected') {
        clearTimeout(timer);
        say('connected');
        notice('');
      }
      if (peer.connectionState === 'failed') fail("WebRTC: the browser lost the portal's WebRTC port; the video comes over the console's connection.");
    };
    const offer = await peer.createOffer();
    await peer.setLocalDescription(offer);
    if (pc !== peer) return;
    say('offered');
    ws.send(JSON.stringify({ rtc: 'offer', id, sdp: peer.localDescription.sdp }));
    timer = setTimeout(() => {
      if (pc === peer && peer.connectionState !== 'connected') {
        fail(`WebRTC: the browser could not reach the portal's WebRTC port in ${setupMS / 1000} s (does this network drop UDP?); the video comes over the console's connection.`);
      }
    }, setupMS);
  };
  const follow = () => {
    if (wanted && connected && !pc && !failed) {
      start().catch((err) => fail(`WebRTC did not start (${err.message}); the video comes over the console's connection.`));
    } else if (!wanted && pc) {
      end("The Picture choice keeps the video on the console's connection.");
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ rtc: 'stop' }));
    }
  };
  const onConnect = () => { connected = true; follow(); };
  rfb.addEventListener('connect', onConnect);
  return {
    want(on, retry = false) {
      wanted = on;
      if (retry) failed = false;
      if (!on && !pc && !failed) say('off', "The Picture choice keeps the video on the console's connection.");
      follow();
    },
    close() {
      rfb.removeEventListener('connect', onConnect);
      ws.removeEventListener('message', onMessage);
      end('');
    },
  };
}

// notice shows why (or hides the notice when empty) in the console's
// WebRTC notice (views/console_quality.templ), where the page has one.
function notice(why) {
  const el = document.getElementById('rtc-notice');
  if (!el) return;
  el.querySelector('span').textContent = why;
  el.hidden = !why;
}
