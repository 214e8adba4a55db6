// The settings the portal keeps for each user (PUT /api/vdi/settings/…):
// the console's Size choice (size.js), the layout VM consoles type with
// (keys-layout.js).
import { errorText } from './connect.js';

// putSetting asks the portal at url to keep body; it returns null once
// kept, else why not, in words for the page.
export async function putSetting(url, body) {
  const res = await fetch(url, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  }).catch((err) => err);
  if (res.ok) return null;
  return res instanceof Error ? `the portal cannot be reached (${res.message})` : errorText(res.status, await res.json().catch(() => ({})));
}
