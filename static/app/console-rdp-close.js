// IronRDP opens its websocket itself and tells the page no close reason,
// so an RDP console released, reclaimed or taken over would only say
// "Disconnected". The page watches the socket IronRDP opens to the
// console's URL and reads the portal's words from its close, as the VNC
// and terminal consoles do.

const watched = new Map(); // URL -> close listener

// watchClose calls onClose(event) when the next websocket opened to url
// closes; it returns a function that stops watching.
export function watchClose(url, onClose) {
  if (!window.WebSocket.corralWatched) {
    const Native = window.WebSocket;
    window.WebSocket = class extends Native {
      static corralWatched = true;

      constructor(u, protocols) {
        super(u, protocols);
        const hit = [...watched.keys()].find((w) => String(u).startsWith(w));
        if (hit) this.addEventListener('close', watched.get(hit), { once: true });
      }
    };
  }
  watched.set(url, onClose);
  return () => { if (watched.get(url) === onClose) watched.delete(url); };
}

// closeWords waits (up to a second: the socket's close may come after
// the session's end) for the close of the socket being watched and
// returns the portal's reason and whether it is final (released,
// reclaimed: reconnecting cannot help), or null when it said nothing.
export function closeWords(closed) {
  return Promise.race([closed, new Promise((resolve) => { setTimeout(() => resolve(null), 1000); })]).then((ev) => {
    if (!ev || !ev.reason) return null;
    return { text: ev.reason, final: ev.code === 1001 && ev.reason !== 'session ended' && !ev.reason.startsWith('taken over') };
  });
}
