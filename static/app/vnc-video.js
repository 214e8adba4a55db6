// The VNC console's watchdog over noVNC 1.7's H.264 path (RFB encoding
// 50, decoded with WebCodecs). noVNC's display draws in order and waits
// for each video frame's decode, so a frame that never comes (the
// decoder closed by an error, or dropping an output) stops every later
// draw, tiles included, for good; upstream's fixes are not released. The
// watchdog notices a video frame at the head of the display's queue that
// has not come for stallMS, drops the frames that will never come, and
// takes this connection off video: noVNC lists its encodings again
// without 50 (the portal's screen hub then paints the whole screen again
// as tiles, losslessly) and asks for the whole screen. It reads noVNC's
// internals (_display, _decoders), pinned with noVNC in package.json.

// stallMS is how long a video frame may take to decode before the page
// counts it lost: a key frame took up to 0.8 s on a loaded 2-core
// machine; a frame taken for lost only costs this page its video.
const stallMS = 5000;
const tickMS = 500;
// H264 is noVNC's number for H.264 rectangles (RFB encoding 50).
export const H264 = 50;

// tilesOnly holds the sockets of connections taken off video; noVNC's
// SetEncodings leaves encoding 50 out for them (and for their later
// picture changes, which list the encodings again).
const tilesOnly = new WeakSet();

// patch makes RFB.messages.clientEncodings follow tilesOnly, once.
function patch(RFB) {
  const send = RFB.messages.clientEncodings;
  if (send.tilesOnly) return;
  const filtered = (sock, encs) => send(sock, tilesOnly.has(sock) ? encs.filter((e) => e !== H264) : encs);
  filtered.tilesOnly = true;
  RFB.messages.clientEncodings = filtered;
}

// notice shows or hides the console's notice that this connection went
// on with tiles (views/console_quality.templ), where the page has one.
export function notice(shown) {
  const el = document.getElementById('video-notice');
  if (!el) return;
  el.hidden = !shown;
}

// watchVideo watches rfb (an instance of RFB) until the returned stop;
// onTiles is told when the connection is taken off video.
export function watchVideo(rfb, RFB, onTiles) {
  patch(RFB);
  let head = null;
  let since = 0;
  const timer = setInterval(() => {
    const display = rfb._display;
    const a = display?._renderQ?.[0];
    if (!a || a.type !== 'frame' || a.frame.ready) {
      head = null;
      return;
    }
    const now = performance.now();
    if (a !== head) {
      head = a;
      since = now;
      return;
    }
    if (now - since < stallMS) return;
    clearInterval(timer);
    console.warn(`noVNC's H.264 frame did not come in ${stallMS} ms: this console goes on with tiles`);
    const video = rfb._decoders?.[H264];
    for (const ctx of Object.values(video?._contexts || {})) {
      if (ctx._decoder && ctx._decoder.state !== 'closed') ctx._decoder.close();
    }
    if (video) video._contexts = {};
    display._renderQ = display._renderQ.filter((e) => e.type !== 'frame' || e.frame.ready);
    tilesOnly.add(rfb._sock);
    rfb._sendEncodings();
    RFB.messages.fbUpdateRequest(rfb._sock, false, 0, 0, rfb._fbWidth, rfb._fbHeight);
    display._scanRenderQ(); // draws what waited behind the lost frame; noVNC reads on
    onTiles();
  }, tickMS);
  return () => clearInterval(timer);
}
