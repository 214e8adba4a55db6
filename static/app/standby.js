// A pool's warm standby as the dashboard's fields take it: "2" (a fixed
// number), "1-20" (follow demand within those bounds), and working hours
// "mon-fri 08:00-18:00 10 Europe/Berlin". The portal checks the values and
// says what to write; these only shape them.

// parseStandby reads "2" as 2 and "1-20" as { min: 1, max: 20 }.
export function parseStandby(text) {
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(text || '0');
  if (!m) throw new Error('Write a number of desktops (0 for none), or MIN-MAX such as 1-20 to follow demand.');
  return m[2] === undefined ? Number(m[1]) : { min: Number(m[1]), max: Number(m[2]) };
}

// parseSchedule reads "DAYS HH:MM-HH:MM N [ZONE]"; empty removes the
// schedule ({}).
export function parseSchedule(text) {
  const f = (text || '').trim().split(/\s+/).filter(Boolean);
  if (f.length === 0) return {};
  const hours = /^(\d\d?:\d\d)-(\d\d?:\d\d)$/.exec(f[1] || '');
  if (f.length < 3 || f.length > 4 || !hours || !/^\d+$/.test(f[2])) {
    throw new Error('Write DAYS HH:MM-HH:MM N [ZONE], e.g. "mon-fri 08:00-18:00 10 Europe/Berlin"; leave it empty for none.');
  }
  const s = { days: f[0], from: hours[1], to: hours[2], standby: Number(f[2]) };
  if (f[3]) s.timezone = f[3];
  return s;
}
