// File transfer over RDP: IronRDP's file transfer provider moves files
// through the clipboard's file streams ([MS-RDPECLIP]). Files dropped on
// the console are offered to the desktop (paste them there); files copied
// in the desktop show as a download bar. A desktop whose RDP server has no
// clipboard file streams never asks for the files: the page says so after
// a wait rather than failing quietly.

const noAnswerMs = 8000;

// rdpFiles enables file transfer on irgui (before connect) and wires drop
// and download; it returns { close() }.
export function rdpFiles(mod, irgui, screen, ui) {
  if (typeof mod.RdpFileTransferProvider !== 'function' || typeof irgui.enableFileTransfer !== 'function') return null;
  const provider = new mod.RdpFileTransferProvider();
  irgui.enableFileTransfer(provider);
  const bar = document.createElement('div');
  bar.className = 'rdp-files';
  bar.dataset.testid = 'file-transfer';
  bar.hidden = true;
  Object.assign(bar.style, {
    position: 'absolute', bottom: '0.5rem', left: '0.5rem', zIndex: 10, padding: '0.4rem 0.6rem',
    background: 'rgba(20, 28, 38, 0.92)', color: '#e8eef4', borderRadius: '6px', font: '13px system-ui, sans-serif',
  });
  screen.append(bar);
  const say = (text) => { bar.hidden = false; bar.replaceChildren(text); };
  let waiting = null;

  const over = (ev) => { ev.preventDefault(); provider.handleDragOver(ev); };
  const drop = async (ev) => {
    ev.preventDefault();
    const files = await provider.handleDrop(ev);
    if (!files.length) return;
    provider.uploadFiles(files);
    say(`Offered ${files.length} file(s) to the desktop: paste them there (Ctrl+V in a folder).`);
    clearTimeout(waiting);
    waiting = setTimeout(() => say("The desktop did not ask for the files: its RDP server does not take files over the clipboard."), noAnswerMs);
  };
  screen.addEventListener('dragover', over);
  screen.addEventListener('drop', drop);
  provider.on('upload-progress', (p) => { clearTimeout(waiting); say(`Uploading ${p.fileName}: ${Math.round(p.percentage)}%`); });
  provider.on('upload-complete', (f) => say(`Uploaded ${f.name}.`));
  provider.on('error', (e) => say(`File transfer failed: ${e.message || e.kind || 'error'}.`));
  provider.on('files-available', (files) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = `Download ${files.length} file(s) copied in the desktop`;
    b.addEventListener('click', async () => {
      for await (const { file, blob } of provider.downloadFiles(files)) {
        const a = Object.assign(document.createElement('a'), { href: URL.createObjectURL(blob), download: file.name });
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      }
      say('Downloaded.');
    });
    bar.hidden = false;
    bar.replaceChildren(b);
  });
  return {
    close() {
      clearTimeout(waiting);
      screen.removeEventListener('dragover', over);
      screen.removeEventListener('drop', drop);
      provider.dispose();
      bar.remove();
    },
  };
}
