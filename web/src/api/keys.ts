// One query-key factory per resource, so invalidation never misses a key.
export const keys = {
  me: ['me'] as const,
  namespaces: ['namespaces'] as const,
  namespace: (ns: string) => ['namespaces', ns] as const,
  draft: (ns: string) => ['namespaces', ns, 'draft'] as const,
  changes: (ns: string, state?: string) => ['namespaces', ns, 'changes', 'list', state ?? 'all'] as const,
  change: (ns: string, id: number) => ['namespaces', ns, 'changes', id] as const,
  versions: (ns: string) => ['namespaces', ns, 'versions', 'list'] as const,
  version: (ns: string, n: number) => ['namespaces', ns, 'versions', n] as const,
  versionDiff: (ns: string, a: number, b: number) => ['namespaces', ns, 'versions', a, 'diff', b] as const,
  rollout: (ns: string, n: number) => ['namespaces', ns, 'versions', n, 'rollout'] as const,
  nodes: (ns: string) => ['namespaces', ns, 'nodes'] as const,
  audit: (filter: Record<string, string>) => ['audit', filter] as const,
  users: ['users'] as const,
  tokens: ['tokens'] as const,
};
