// The RDP console's clipboard and special keys. IronRDP's clipboard works
// through the browser's async clipboard: the desktop's clipboard is saved
// to this device's, then read back for the panel; the panel's text is put
// on this device's clipboard, then sent. Both need the browser's clipboard
// permission; without it the panel says so. The pool's policy is applied
// here, in the page: the portal does not strip RDP's clipboard channel
// (see README, "Clipboard and file transfer").

// rdpClipboard sets up IronRDP's clipboard under policy and returns the
// module's clipboard { send(text) }, or undefined when the policy is off.
export function rdpClipboard(irgui, policy, ui) {
  const toDesktop = policy.clipboard !== 'off' && policy.clipboard !== 'from-desktop';
  const fromDesktop = policy.clipboard !== 'off' && policy.clipboard !== 'to-desktop';
  irgui.setEnableClipboard(toDesktop || fromDesktop);
  if (!toDesktop && !fromDesktop) return undefined;
  irgui.setEnableAutoClipboard(false); // the page decides when, by policy
  if (fromDesktop) {
    irgui.onClipboardRemoteUpdateCallback(async () => {
      try {
        await irgui.saveRemoteClipboardData();
        ui.clipboard?.(await navigator.clipboard.readText());
      } catch {
        ui.clipboard?.('(The desktop copied something, but this browser does not let the page read the clipboard.)');
      }
    });
  }
  return {
    async send(text) {
      if (!toDesktop) throw new Error("the pool's policy keeps text from the desktop");
      await navigator.clipboard.writeText(text);
      await irgui.sendClipboardData();
    },
  };
}

// rdpSpecial sends a special-keys combination: IronRDP's own Ctrl+Alt+Del
// and Windows key, and the others as scan codes (console-rdp-keys.js).
export function rdpSpecial(irgui, keys, c) {
  if (c.id === 'ctrl-alt-del') { irgui.ctrlAltDel(); return true; }
  if (c.id === 'super') { irgui.metaKey(); return true; }
  return keys.combo(c);
}
