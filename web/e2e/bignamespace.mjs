// The benchmark's namespace of n rules (a quarter routes, the rest limits,
// the first 100 limits at the given rate) and its publication through a
// change, shared by bench.mjs and profile-diff.mjs.

export function bigRuleSet(ns, n, rate) {
  const routes = [];
  const limits = [];
  const nRoutes = n / 4;
  for (let i = 0; i < nRoutes; i++) routes.push({ id: `r-${i}`, match: { pathPrefix: `/svc/${i}/` }, upstream: { targets: [{ url: 'http://127.0.0.1:9' }] } });
  for (let i = 0; i < n - nRoutes; i++) {
    limits.push({ id: `l-${i}`, routes: [`r-${i % nRoutes}`], key: ['ip'], algorithm: 'token_bucket', rate: i < 100 ? rate : 100, period: '1s' });
  }
  return { namespace: ns, routes, limits };
}

export async function publish(api, approver, ns, doc, title) {
  const etag = (await api.ok('GET', `/api/v1/namespaces/${ns}/draft`)).headers.get('etag');
  await api.ok('PUT', `/api/v1/namespaces/${ns}/draft`, doc, { 'If-Match': etag });
  const c = (await api.ok('POST', `/api/v1/namespaces/${ns}/changes`, { title })).data;
  await approver.ok('POST', `/api/v1/namespaces/${ns}/changes/${c.id}/approve`, { comment: 'bench' });
  return (await approver.ok('POST', `/api/v1/namespaces/${ns}/changes/${c.id}/publish`, {})).data.number;
}
