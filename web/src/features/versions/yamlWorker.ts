// Web worker: fetches one version's rule set and writes it as YAML, so the
// version page's main thread neither parses the JSON (1 MB at 10,000 rules)
// nor builds the YAML, and the two sides of a diff are made in parallel.
// Message in: { url }; out: { yaml } or { status, error } (the refused
// request's status and body; status 0 when the request did not complete).
import { toYaml } from '../draft/toYaml';

const ctx = self as unknown as { onmessage: ((e: MessageEvent<{ url: string }>) => void) | null; postMessage(m: unknown): void };

ctx.onmessage = async (e) => {
  try {
    const r = await fetch(e.data.url, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    const body: unknown = await r.json().catch(() => undefined);
    if (!r.ok) {
      ctx.postMessage({ status: r.status, error: body });
      return;
    }
    ctx.postMessage({ yaml: toYaml(body as Parameters<typeof toYaml>[0]) });
  } catch (err) {
    ctx.postMessage({ status: 0, error: String(err) });
  }
};
