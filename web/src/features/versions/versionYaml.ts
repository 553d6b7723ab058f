// A version's YAML, made by a web worker (yamlWorker.ts): fetch, JSON parse
// and YAML writing all happen off the page's main thread.
import { ApiError, asProblem, unauthorized } from '../../api/client';

type Reply = { yaml: string } | { status: number; error: unknown };

/** fetchVersionYaml is version n of namespace ns as YAML; it fails with ApiError as the API client does. */
export function fetchVersionYaml(ns: string, n: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('./yamlWorker.ts', import.meta.url), { type: 'module' });
    w.onmessage = (e: MessageEvent<Reply>) => {
      w.terminate();
      const r = e.data;
      if ('yaml' in r) {
        resolve(r.yaml);
        return;
      }
      if (r.status === 401) unauthorized();
      reject(r.status === 0 ? new Error(`loading version ${n}: ${String(r.error)}`) : new ApiError(r.status, asProblem(r.status, r.error)));
    };
    w.onerror = (e) => {
      w.terminate();
      reject(new Error(`loading version ${n}: ${e.message || 'the worker failed'}`));
    };
    w.postMessage({ url: `/api/v1/namespaces/${encodeURIComponent(ns)}/versions/${n}` });
  });
}
