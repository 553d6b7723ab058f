import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';

export function useNamespaces() {
  return useQuery({ queryKey: keys.namespaces, queryFn: () => unwrap(client.GET('/api/v1/namespaces')) });
}

export function useNamespace(ns: string) {
  return useQuery({ queryKey: keys.namespace(ns), queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}', { params: { path: { ns } } })) });
}

export function useNodes(ns: string) {
  return useQuery({
    queryKey: keys.nodes(ns),
    queryFn: () => unwrap(client.GET('/api/v1/namespaces/{ns}/nodes', { params: { path: { ns } } })),
    // The stream's node updates refetch it at once; this is the fallback.
    refetchInterval: 3_000,
  });
}

export function useCreateNamespace() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: { name: string; description: string }) => unwrap(client.POST('/api/v1/namespaces', { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.namespaces }),
  });
}
