/**
 * The form of a URL that audit events and logs carry: origin and path, with query values
 * dropped and their keys kept. Query values may carry data or credentials (`?apikey=…`), and the
 * same scrubbing must hold for every event that names a URL.
 */
export function auditUrl(raw: string): string {
  try {
    const u = new URL(raw);
    const keys = [...new Set(u.searchParams.keys())];
    return `${u.origin}${u.pathname}${keys.length ? `?${keys.map((k) => `${encodeURIComponent(k)}=`).join('&')}` : ''}`;
  } catch {
    return '(unparseable)';
  }
}
