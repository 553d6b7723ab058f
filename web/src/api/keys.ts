// One query-key factory per resource, so invalidation never misses a key.
export const keys = {
  me: ['me'] as const,
  namespaces: ['namespaces'] as const,
  namespace: (ns: string) => ['namespaces', ns] as const,
  draft: (ns: string) => ['namespaces', ns, 'draft'] as const,
  // draftCheck is the server's check of one document of the draft editor (doc: its id there).
  draftCheck: (ns: string, doc: number) => ['namespaces', ns, 'draftCheck', doc] as const,
  changes: (ns: string, state?: string) => ['namespaces', ns, 'changes', 'list', state ?? 'all'] as const,
  change: (ns: string, id: number) => ['namespaces', ns, 'changes', id] as const,
  preview: (ns: string, id: number) => ['namespaces', ns, 'changes', id, 'preview'] as const,
  versions: (ns: string) => ['namespaces', ns, 'versions', 'list'] as const,
  version: (ns: string, n: number) => ['namespaces', ns, 'versions', n] as const,
  versionDiff: (ns: string, a: number, b: number) => ['namespaces', ns, 'versions', a, 'diff', b] as const,
  rollout: (ns: string, n: number) => ['namespaces', ns, 'versions', n, 'rollout'] as const,
  nodes: (ns: string) => ['namespaces', ns, 'nodes'] as const,
  // stats(ns) is every stats query of the namespace (what a stream update touches).
  // A range is seconds back from now, or a fixed start (`from:UNIXSECONDS`, a custom range).
  stats: (ns: string, range?: number | `from:${number}`, node?: string) => (range === undefined ? (['namespaces', ns, 'stats'] as const) : (['namespaces', ns, 'stats', range, node ?? ''] as const)),
  events: (ns: string, filter?: Record<string, string>) => (filter === undefined ? (['namespaces', ns, 'events'] as const) : (['namespaces', ns, 'events', filter] as const)),
  canary: (ns: string) => ['namespaces', ns, 'canary'] as const,
  audit: (filter: Record<string, string>) => ['audit', filter] as const,
  users: ['users'] as const,
  tokens: ['tokens'] as const,
};
