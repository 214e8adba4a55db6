// The VNC console's WebRTC video path: the screen hub's H.264, which
// otherwise comes over the console's websocket as RFB rectangles, comes
// on a WebRTC video track instead, for links where TCP is the bottleneck
// (loss, a long round trip). Signalled over the console's own websocket
// as JSON text messages (noVNC's RFB stream is binary); the portal
// answers with its own candidates only and ignores the browser's, so the
// offer is sent at once. Input, clipboard, cursor, the tiles between
// motion and the lossless repaint after it stay on the websocket: each
// decoded video frame is drawn into noVNC's own screen, in turn with the
// tiles, so scaling, zoom and input work as before. When the portal
// refuses (WebRTC off, a screen relayed from another portal server) or
// the track ends, the console goes on with the
// websocket's video, as without WebRTC.

// attachRTC offers rfb's console (whose websocket is ws) a WebRTC track
// once noVNC is connected, drawing its frames into noVNC's screen; it
// returns a function that ends it. screen.dataset.rtc says where the
// video comes from ('offered', 'connected', 'off' with the reason in
// screen.dataset.rtcWhy), screen.dataset.rtcFrames how many frames the
// track drew.
export function attachRTC(rfb, ws, stage, screen) {
  if (!window.RTCPeerConnection) return () => {};
  let pc = null;
  let video = null;
  let frames = 0;
  let ended = false;
  const say = (state, why) => {
    screen.dataset.rtc = state;
    if (why) screen.dataset.rtcWhy = why;
  };
  const end = (why) => {
    if (pc) pc.close();
    pc = null;
    if (video) video.remove();
    video = null;
    if (!ended && why) say('off', why);
  };
  const onMessage = (ev) => {
    if (typeof ev.data !== 'string') return;
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.rtc === 'answer' && pc) {
      pc.setRemoteDescription({ type: 'answer', sdp: m.sdp }).catch((err) => end(`The answer could not be used: ${err.message}`));
    } else if (m.rtc === 'refused' || m.rtc === 'ended') {
      end(m.error);
    }
  };
  ws.addEventListener('message', onMessage);

  const draw = (now, meta) => {
    if (!video) return;
    const display = rfb._display;
    const w = rfb._fbWidth;
    const h = rfb._fbHeight;
    if (display && w && h && video.videoWidth >= w && video.videoHeight >= h) {
      // In turn with the tiles: noVNC's render queue draws a ready frame
      // where it stands and closes it.
      const frame = new VideoFrame(video, { timestamp: Math.round(meta.mediaTime * 1e6) });
      display.videoFrame(0, 0, w, h, { ready: true, frame, promise: Promise.resolve() });
      display.flip();
      frames++;
      screen.dataset.rtcFrames = String(frames);
    }
    video.requestVideoFrameCallback(draw);
  };

  const start = async () => {
    pc = new RTCPeerConnection({ iceServers: [] }); // the portal's port only: no STUN, no TURN
    screen.rtcPeer = pc; // for tests and the devtools
    pc.addTransceiver('video', { direction: 'recvonly' });
    pc.ontrack = (ev) => {
      video = document.createElement('video');
      video.className = 'rtc-source';
      video.muted = true;
      video.playsInline = true;
      video.srcObject = new MediaStream([ev.track]);
      stage.append(video); // a video out of the document gets no frame callbacks
      video.play().catch(() => {});
      video.requestVideoFrameCallback(draw);
    };
    pc.onconnectionstatechange = () => {
      if (!pc) return;
      if (pc.connectionState === 'connected') say('connected');
      if (pc.connectionState === 'failed') end('The browser could not reach the portal\'s WebRTC port.');
    };
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    say('offered');
    ws.send(JSON.stringify({ rtc: 'offer', sdp: pc.localDescription.sdp }));
  };
  const onConnect = () => {
    if (typeof VideoFrame === 'undefined') return; // frames are drawn as VideoFrames
    start().catch((err) => end(`WebRTC did not start: ${err.message}`));
  };
  rfb.addEventListener('connect', onConnect);
  return () => {
    ended = true;
    rfb.removeEventListener('connect', onConnect);
    ws.removeEventListener('message', onMessage);
    end('');
  };
}
