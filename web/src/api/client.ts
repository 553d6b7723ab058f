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

/** setCsrfToken records the session's CSRF token (from login or /me). */
export function setCsrfToken(t: string | undefined) {
  csrfToken = t ?? '';
}

/** unauthorized reports an expired session seen outside this client (the version page's YAML worker). */
export function unauthorized() {
  onUnauthorized();
}

/** setUnauthorizedHandler is called when a request's session has expired. */
export function setUnauthorizedHandler(f: () => void) {
  onUnauthorized = f;
}

const mutating = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const session: Middleware = {
  onRequest({ request }) {
    if (mutating.has(request.method) && csrfToken) {
      request.headers.set('X-CSRF-Token', csrfToken);
    }
    return request;
  },
  onResponse({ request, response }) {
    const url = new URL(request.url, window.location.origin);
    if (response.status === 401 && url.pathname !== '/api/v1/auth/login' && url.pathname !== '/api/v1/me') {
      onUnauthorized();
    }
    return response;
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
