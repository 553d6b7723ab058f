// The session: who is signed in (GET /me), sign in and out. The CSRF token
// of the session rides along with /me and login and is sent on every
// mutation by the API client.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { ApiError, client, setCsrfToken, unwrap, type Role, type User } from '../../api/client';
import { keys } from '../../api/keys';

export type Me = { user: User; role: Role; csrfToken?: string };

const rank: Record<Role, number> = { viewer: 0, editor: 1, approver: 2, admin: 3 };

/** allows reports whether role has at least min. */
export function allows(role: Role | undefined, min: Role): boolean {
  return role !== undefined && rank[role] >= rank[min];
}

export function useMe() {
  return useQuery({
    queryKey: keys.me,
    staleTime: 60_000,
    queryFn: async (): Promise<Me | null> => {
      try {
        const me = await unwrap(client.GET('/api/v1/me'));
        setCsrfToken(me.csrfToken);
        return me as Me;
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return null;
        throw e;
      }
    },
  });
}

export function useLogin() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { username: string; password: string }) => unwrap(client.POST('/api/v1/auth/login', { body })),
    onSuccess: (r) => {
      setCsrfToken(r.csrfToken);
      qc.clear();
      qc.setQueryData<Me>(keys.me, { user: r.user!, role: r.user!.role!, csrfToken: r.csrfToken });
    },
  });
}

export function useLogout() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => unwrap(client.POST('/api/v1/auth/logout')),
    onSettled: () => {
      setCsrfToken('');
      qc.clear();
      qc.setQueryData(keys.me, null);
    },
  });
}

/**
 * useReauthenticate signs the signed-in user in again after their session
 * expired, keeping the query cache (useLogin clears it): the page, and
 * whatever is typed in it, stays. Queries that failed meanwhile are asked
 * again.
 */
export function useReauthenticate() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { username: string; password: string }) => unwrap(client.POST('/api/v1/auth/login', { body })),
    onSuccess: (r) => {
      setCsrfToken(r.csrfToken);
      qc.setQueryData<Me>(keys.me, { user: r.user!, role: r.user!.role!, csrfToken: r.csrfToken });
      void qc.invalidateQueries({ predicate: (q) => q.state.status === 'error' });
    },
  });
}
