// Words and times for people, one way everywhere: counts with the right
// plural, dates ISO-like with the zone (never the browser locale's order),
// relative times for "how long ago".

/** plural is "1 namespace", "2 namespaces"; many is the plural when it is not word + "s". */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/**
 * absolute is a time as "2026-12-04 18:02 UTC": ISO-like (year first,
 * 24-hour), in timeZone (the browser's by default), with the zone's short
 * name, so no reader has to guess the day-month order or the zone. With
 * seconds, "2026-12-04 18:02:05 UTC" (a chart's 5-second step).
 */
export function absolute(t: string | Date | null | undefined, timeZone?: string, seconds = false): string {
  if (!t) return '';
  const d = typeof t === 'string' ? new Date(t) : t;
  if (Number.isNaN(d.getTime())) return String(t);
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', ...(seconds ? { second: '2-digit' } : {}), hourCycle: 'h23', timeZoneName: 'short' })
      .formatToParts(d)
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}${seconds ? `:${parts.second}` : ''} ${parts.timeZoneName}`;
}

/**
 * axisTimes labels a time axis's ticks (unix seconds) the console's way,
 * not uPlot's locale default ("1:48am 12/5/26"): "01:48" (24-hour, in
 * timeZone, the browser's by default), and under the first tick and any
 * tick on a new day, that day and the zone: "01:48\n2026-12-05 UTC".
 */
export function axisTimes(ticks: number[], timeZone?: string): string[] {
  let day = '';
  return ticks.map((t) => {
    const [date, time, zone] = absolute(new Date(t * 1000), timeZone).split(' ');
    if (date === day) return time;
    day = date;
    return `${time}\n${date} ${zone}`;
  });
}

/** relative is how long before (or after) now t is: "just now", "5 min ago", "in 2 h", "3 d ago". */
export function relative(t: string | Date | null | undefined, now: number = Date.now()): string {
  if (!t) return '';
  const d = typeof t === 'string' ? new Date(t) : t;
  if (Number.isNaN(d.getTime())) return String(t);
  const s = Math.round((d.getTime() - now) / 1000);
  const a = Math.abs(s);
  if (a < 45) return 'just now';
  const v = a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s < 0 ? `${v} ago` : `in ${v}`;
}
