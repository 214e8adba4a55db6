// The console's Files panel: files dropped on the console or picked are
// uploaded (PUT …/files/{name}) into the desktop's ~/Uploads, one at a
// time with progress; ~/Downloads is listed (GET …/files) with a link to
// download each. The portal enforces the pool's policy, sizes and names;
// this page only says what happened.
const panel = document.getElementById('files-panel');
const toggle = document.getElementById('files-toggle');
const note = document.getElementById('files-note');
const list = document.getElementById('files-list');
const drop = document.getElementById('files-drop');
const url = panel.dataset.files;
const canUpload = panel.dataset.upload === 'true';
const canDownload = panel.dataset.download === 'true';

function say(text, kind) {
  note.textContent = text;
  note.dataset.kind = kind || '';
}

function show(open) {
  panel.hidden = !open;
  toggle.setAttribute('aria-pressed', String(open));
  if (open && canDownload) refresh();
}

toggle.addEventListener('click', () => show(panel.hidden));
document.getElementById('files-close').addEventListener('click', () => show(false));

// errorOf reads the portal's {error, hint} answer as one sentence.
function errorOf(status, body) {
  try {
    const e = JSON.parse(body);
    if (e && e.error) return e.hint ? `${e.error} ${e.hint}` : e.error;
  } catch { /* not JSON: say the status */ }
  return `The upload failed (HTTP ${status}).`;
}

function sizeText(n) {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${Math.round(n / (1 << 10))} KiB`;
  return `${n} bytes`;
}

// upload sends one file; XMLHttpRequest, because fetch reports no upload
// progress.
function upload(file) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `${url}/${encodeURIComponent(file.name)}`);
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) say(`Uploading ${file.name}: ${Math.round((100 * e.loaded) / e.total)} %`);
    };
    xhr.onload = () => {
      if (xhr.status === 201) {
        const got = JSON.parse(xhr.responseText);
        say(`Uploaded ${got.name} (${sizeText(got.size)}) into ~/Uploads.`, 'ok');
        resolve(true);
      } else {
        say(errorOf(xhr.status, xhr.responseText), 'error');
        resolve(false);
      }
    };
    xhr.onerror = () => {
      say(`${file.name} did not reach the portal: check your connection and try again.`, 'error');
      resolve(false);
    };
    xhr.send(file);
  });
}

async function uploadAll(files) {
  if (!canUpload) {
    show(true);
    say('This pool does not allow uploads into its desktops.', 'error');
    return;
  }
  show(true);
  let done = 0;
  for (const f of files) {
    if (await upload(f)) done++;
    else break; // say the first refusal; do not bury it under the next
  }
  if (files.length > 1 && done === files.length) say(`Uploaded ${done} files into ~/Uploads.`, 'ok');
}

async function refresh() {
  let files;
  try {
    const res = await fetch(url, { headers: { Accept: 'application/json' } });
    const body = await res.text();
    if (!res.ok) {
      say(errorOf(res.status, body), 'error');
      return;
    }
    files = JSON.parse(body);
  } catch {
    say('The portal did not answer: check your connection and try again.', 'error');
    return;
  }
  list.replaceChildren();
  if (files.length === 0) {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = 'Nothing yet: save a file to ~/Downloads in the desktop, then Refresh.';
    list.append(li);
    return;
  }
  for (const f of files) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = `${url}/${encodeURIComponent(f.name)}`;
    a.download = f.name;
    a.textContent = f.name;
    a.dataset.testid = 'files-download';
    const size = document.createElement('span');
    size.className = 'muted';
    size.textContent = sizeText(f.size);
    li.append(a, size);
    list.append(li);
  }
}

if (canDownload) document.getElementById('files-refresh').addEventListener('click', refresh);
if (canUpload) {
  const pick = document.getElementById('files-pick');
  pick.addEventListener('change', () => {
    const files = [...pick.files];
    pick.value = '';
    uploadAll(files);
  });
  // Dropping files anywhere on the console uploads them; the overlay says
  // so while they are dragged over it.
  let depth = 0;
  const isFiles = (e) => [...(e.dataTransfer?.types || [])].includes('Files');
  document.addEventListener('dragenter', (e) => {
    if (!isFiles(e)) return;
    depth++;
    drop.hidden = false;
  });
  document.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (depth === 0) drop.hidden = true;
  });
  document.addEventListener('dragover', (e) => {
    if (isFiles(e)) e.preventDefault();
  });
  document.addEventListener('drop', (e) => {
    if (!isFiles(e)) return;
    e.preventDefault();
    depth = 0;
    drop.hidden = true;
    uploadAll([...e.dataTransfer.files]);
  });
}
