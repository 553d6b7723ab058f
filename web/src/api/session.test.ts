import createClient from 'openapi-fetch';
import { afterEach, describe, expect, it } from 'vitest';
import type { paths } from './schema.gen';
import { ApiError, session, setCsrfToken, setReauthHandler, setUnauthorizedHandler, unwrap } from './client';

/**
 * A server in a function: one session (its cookie is implied), which the
 * test expires; a mutation needs its CSRF token. It records what it got.
 */
function server() {
  const s = { live: true, csrf: 'old', got: [] as { method: string; path: string; csrf: string | null; body: string }[] };
  // Like a browser's fetch, it refuses to be called as another object's method.
  const fetch = async function (this: unknown, r: Request) {
    if (this !== undefined && this !== globalThis) throw new TypeError("Failed to execute 'fetch' on 'Window': Illegal invocation");
    const body = await r.text();
    const path = new URL(r.url).pathname;
    s.got.push({ method: r.method, path, csrf: r.headers.get('X-CSRF-Token'), body });
    const json = (status: number, v: unknown) => new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } });
    if (!s.live) return json(401, { type: 'about:blank', title: 'Unauthorized', status: 401, code: 'EUNAUTHORIZED', detail: 'the session is unknown or has expired; log in again' });
    if (r.method !== 'GET' && r.headers.get('X-CSRF-Token') !== s.csrf) return json(403, { type: 'about:blank', title: 'Forbidden', status: 403, code: 'EFORBIDDEN' });
    return json(200, { etag: `"saved:${body}"` });
  };
  const client = createClient<paths>({ baseUrl: 'http://sluice.test', fetch });
  client.use(session);
  return { s, client };
}

const save = (client: ReturnType<typeof server>['client'], rate: number) =>
  unwrap(client.PUT('/api/v1/namespaces/{ns}/draft', { params: { path: { ns: 'shop' }, header: { 'If-Match': '"1"' } }, body: { namespace: 'shop', limits: [{ id: 'l', rate } as never] } }));

afterEach(() => {
  setReauthHandler(null);
  setUnauthorizedHandler(() => {});
  setCsrfToken('');
});

describe('session middleware', () => {
  it('a save whose session expired waits for the re-authentication and is sent again, body and If-Match as they were, with the new CSRF token', async () => {
    const { s, client } = server();
    setCsrfToken('old');
    s.live = false;
    let asked = 0;
    setReauthHandler(async () => {
      asked++;
      s.live = true;
      s.csrf = 'new';
      setCsrfToken('new');
      return true;
    });
    const r = await save(client, 11);
    expect(r.etag).toContain('"rate":11');
    expect(asked).toBe(1);
    expect(s.got.map((g) => [g.method, g.csrf])).toEqual([
      ['PUT', 'old'],
      ['PUT', 'new'],
    ]);
    expect(s.got[1].body).toBe(s.got[0].body);
  });

  it('mutations meeting the expiry together ask once', async () => {
    const { s, client } = server();
    s.live = false;
    let asked = 0;
    let signIn: (ok: boolean) => void = () => {};
    setReauthHandler(() => {
      asked++;
      return new Promise((ok) => (signIn = ok));
    });
    const both = Promise.all([save(client, 1), save(client, 2)]);
    await new Promise((r) => setTimeout(r, 20));
    s.live = true;
    s.csrf = 'x';
    setCsrfToken('x');
    signIn(true);
    const [a, b] = await both;
    expect(asked).toBe(1);
    expect([a.etag, b.etag].map((e) => e?.includes('"rate":1}') || e?.includes('"rate":2}'))).toEqual([true, true]);
  });

  it('declined: the mutation fails with its 401 and the session is not ended behind the user', async () => {
    const { s, client } = server();
    s.live = false;
    let ended = 0;
    setUnauthorizedHandler(() => ended++);
    setReauthHandler(async () => false);
    const err = await save(client, 3).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(401);
    expect(s.got).toHaveLength(1);
    expect(ended).toBe(0);
  });

  it('a read refused with 401 ends the session; so does a mutation when nothing re-authenticates', async () => {
    const { s, client } = server();
    s.live = false;
    let ended = 0;
    setUnauthorizedHandler(() => ended++);
    setReauthHandler(async () => true);
    await client.GET('/api/v1/namespaces');
    expect(ended).toBe(1);
    setReauthHandler(null);
    await expect(save(client, 4)).rejects.toBeInstanceOf(ApiError);
    expect(ended).toBe(2);
  });

  it('a wrong password at sign-in is the login form’s error, not an expired session', async () => {
    const { s, client } = server();
    s.live = false;
    let asked = 0;
    let ended = 0;
    setReauthHandler(async () => (asked++, true));
    setUnauthorizedHandler(() => ended++);
    const r = await client.POST('/api/v1/auth/login', { body: { username: 'editor', password: 'wrong' } });
    expect(r.response.status).toBe(401);
    expect([asked, ended]).toEqual([0, 0]);
  });
});
