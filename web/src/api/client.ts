// The one API client: types come from api/openapi.yaml (schema.gen.ts, made
// by `npm run gen`), so a contract change the console does not follow fails
// the type check.
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema.gen';

export type Schemas = components['schemas'];
export type RuleSet = Schemas['RuleSet'];
export type Limit = Schemas['Limit'];
export type Route = Schemas['Route'];
export type Change = Schemas['Change'];
export type Diff = Schemas['Diff'];
export type Version = Schemas['Version'];
export type User = Schemas['User'];
export type Role = Schemas['Role'];
export type Namespace = Schemas['Namespace'];
export type AuditEvent = Schemas['AuditEvent'];
export type Token = Schemas['Token'];
export type Node = Schemas['Node'];
export type Preview = Schemas['Preview'];
export type Problem = Schemas['Problem'];
export type FieldError = NonNullable<Problem['errors']>[number];

/** ApiError is a refused request: the HTTP status and the server's problem document. */
export class ApiError extends Error {
  readonly status: number;
  readonly problem: Problem;
  constructor(status: number, problem: Problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
  get fields(): FieldError[] {
    return this.problem.errors ?? [];
  }
}

let csrfToken = '';
let onUnauthorized: () => void = () => {};
let reauth: (() => Promise<boolean>) | null = null;
let reauthing: Promise<boolean> | null = null;

/** setCsrfToken records the session's CSRF token (from login or /me). */
export function setCsrfToken(t: string | undefined) {
  csrfToken = t ?? '';
}

/** unauthorized reports an expired session seen outside this client (the version page's YAML worker). */
export function unauthorized() {
  onUnauthorized();
}

/** setUnauthorizedHandler is called when a request's session has expired (and no re-authentication is under way). */
export function setUnauthorizedHandler(f: () => void) {
  onUnauthorized = f;
}

/**
 * setReauthHandler sets what signs the same user in again when a
 * mutation's session has expired (the console's password dialog): it
 * resolves true once signed in, and the mutation is then sent again, as it
 * was, with the new session's CSRF token; false when the user declines,
 * and the mutation fails with its 401. Every mutation that meets the
 * expiry meanwhile waits on the same one. null: none (a 401 then ends the
 * session, as on a read).
 */
export function setReauthHandler(f: (() => Promise<boolean>) | null) {
  reauth = f;
}

function reauthenticate(): Promise<boolean> {
  reauthing ??= (reauth ? reauth() : Promise.resolve(false))
    .catch(() => false)
    .finally(() => {
      reauthing = null;
    });
  return reauthing;
}

const mutating = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
// Signing in and out answer 401 for their own reasons (a wrong password).
const isAuth = (r: Request) => new URL(r.url).pathname.startsWith('/api/v1/auth/') || new URL(r.url).pathname === '/api/v1/me';

// A copy of each mutation in flight while a re-authentication handler is
// set, by openapi-fetch's request id: a request's body is read once.
const copies = new Map<string, Request>();

/**
 * session is the client's middleware: the CSRF token on every mutation; a
 * mutation refused with 401 re-authenticates and is sent again; any other
 * 401 ends the session (setUnauthorizedHandler).
 */
export const session: Middleware = {
  onRequest({ request, id }) {
    if (mutating.has(request.method)) {
      if (csrfToken) request.headers.set('X-CSRF-Token', csrfToken);
      if (reauth && !isAuth(request)) copies.set(id, request.clone());
    }
    return request;
  },
  async onResponse({ request, response, id, options }) {
    const copy = copies.get(id);
    copies.delete(id);
    if (response.status !== 401 || isAuth(request)) return response;
    if (copy) {
      if (!(await reauthenticate())) return response;
      const headers = new Headers(copy.headers);
      headers.set('X-CSRF-Token', csrfToken);
      // Called unbound: a browser's fetch refuses any other this ("Illegal invocation").
      const send = options.fetch;
      return send(new Request(copy, { headers }));
    }
    if (!reauthing) onUnauthorized();
    return response;
  },
  onError({ id }) {
    copies.delete(id);
  },
};

export const client = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });
client.use(session);

/** asProblem is a refused request's body as a problem document, or one made from its status. */
export function asProblem(status: number, error: unknown): Problem {
  if (error && typeof error === 'object' && 'code' in error) return error as Problem;
  return { type: 'about:blank', title: `HTTP ${status}`, status, code: 'EINTERNAL', detail: typeof error === 'string' ? error : undefined };
}

/** unwrap returns the data of a successful call and throws ApiError otherwise. */
export async function unwrap<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await p;
  if (!response.ok) throw new ApiError(response.status, asProblem(response.status, error));
  return data as T;
}

/** errorMessage is a user-facing sentence for any thrown value. */
export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
