import { Anchor, Badge, Group, Switch, Table, Text, TextInput, Tooltip } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import type { Node } from '../../api/client';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { StreamBadge } from '../../components/StreamBadge';
import { Loading, Page, When } from '../../components/Page';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useNodes } from '../namespaces/hooks';
import { CanaryStatus } from '../canary/CanaryStatus';
import { fleetCounts, fleetText, publishedVersion } from '../canary/summary';
import { useVersions } from '../versions/hooks';
import { useCanary } from './hooks';
import { nodeKind } from './kind';
import { matches, parseSelector } from './labels';

export const statusColor: Record<string, string> = { current: 'green', behind: 'orange', ahead: 'grape', canary: 'yellow' };

export function pct(x: number | undefined): string {
  return x === undefined ? '' : `${(x * 100).toFixed(x < 0.01 && x > 0 ? 2 : 1)}%`;
}

export function ms(seconds: number | undefined): string {
  return seconds === undefined ? '' : `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : 0)} ms`;
}

/** sourceLabel names where a node's rules came from: etcd ("etcd:<endpoints>"), its on-disk cache, or a file. */
export function sourceLabel(source: string | undefined): string {
  if (!source) return '';
  if (/cache/i.test(source)) return 'booted from cache';
  if (source.startsWith('etcd')) return 'etcd';
  return source;
}

/** NodeKindBadge is a node's kind: gateway, or sdk with its service's name. */
export function NodeKindBadge({ n }: { n: Node }) {
  const k = nodeKind(n);
  return (
    <Badge variant="light" color={k.kind === 'sdk' ? 'teal' : 'blue'} tt="none">
      {k.label}
    </Badge>
  );
}

/** NodeState is a node's live/gone/draining badges. */
export function NodeState({ n }: { n: Node }) {
  return (
    <Group gap={4} wrap="nowrap">
      {n.live ? <Badge color="green">live</Badge> : <Badge color="gray">gone</Badge>}
      {n.draining ? <Badge color="red">draining</Badge> : n.override?.drain && <Badge color="orange">drain requested</Badge>}
      {n.override && Object.keys(n.override.degradeLevels ?? {}).length > 0 && <Badge color="orange">degrade forced</Badge>}
    </Group>
  );
}

export function NodesPage() {
  const ns = useParams().ns!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const nodes = useNodes(ns);
  const versions = useVersions(ns);
  const canary = useCanary(ns);
  const [search, setSearch] = useSearchParams();
  const [text, setText] = useState(search.get('labels') ?? '');
  const [showGone, setShowGone] = useState(true);
  const sel = useMemo(() => parseSelector(text), [text]);
  const published = publishedVersion(versions.data?.items ?? [], canary.data?.version);
  const selector = sel.selector;
  const items = useMemo(
    () =>
      (nodes.data?.items ?? [])
        .filter((n) => (showGone || n.live) && (!selector || matches(n.labels, selector)))
        .sort((a, b) => Number(b.live) - Number(a.live) || (a.nodeId ?? '').localeCompare(b.nodeId ?? '')),
    [nodes.data, selector, showGone],
  );

  return (
    <Page title="Nodes" crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      <Group align="flex-end" wrap="wrap">
        <TextInput
          label="Label filter"
          placeholder="zone=a, tier=edge"
          value={text}
          error={sel.error}
          onChange={(e) => {
            setText(e.currentTarget.value);
            setSearch(e.currentTarget.value ? { labels: e.currentTarget.value } : {}, { replace: true });
          }}
          w={280}
        />
        <Switch label="Show gone nodes" checked={showGone} onChange={(e) => setShowGone(e.currentTarget.checked)} />
        <StreamBadge state={stream} />
        {published !== undefined && <Text size="sm">Published: v{published}; {fleetText(fleetCounts(nodes.data?.items ?? []), published, canary.data?.version)}</Text>}
        <CanaryStatus ns={ns} />
      </Group>
      {nodes.isPending && <Loading />}
      <ErrorAlert error={nodes.error} />
      {nodes.data && (nodes.data.items ?? []).length === 0 && <Text>No node (gateway or service) follows this namespace.</Text>}
      {nodes.data && (nodes.data.items ?? []).length > 0 && items.length === 0 && <Text>No node matches the filter.</Text>}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={960}>
          <Table aria-label="Nodes" striped horizontalSpacing="xs">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Node</Table.Th>
                <Table.Th>Kind</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>Labels</Table.Th>
                <Table.Th>Build</Table.Th>
                <Table.Th>Version</Table.Th>
                <Table.Th>Source</Table.Th>
                <Table.Th>Apply error</Table.Th>
                <Table.Th>Last seen</Table.Th>
                <Table.Th ta="right">rps</Table.Th>
                <Table.Th ta="right">Rejected</Table.Th>
                <Table.Th ta="right">p99</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((n) => {
                const st = n.versionState;
                return (
                  <Table.Tr key={n.nodeId}>
                    <Table.Td>
                      <Anchor component={Link} to={`/namespaces/${ns}/nodes/${encodeURIComponent(n.nodeId ?? '')}`}>
                        {n.nodeId}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <NodeKindBadge n={n} />
                    </Table.Td>
                    <Table.Td>
                      <NodeState n={n} />
                    </Table.Td>
                    <Table.Td>
                      <Group gap={4}>
                        {Object.entries(n.labels ?? {}).map(([k, v]) => (
                          <Badge key={k} variant="outline" color="gray" tt="none">
                            {k}={v}
                          </Badge>
                        ))}
                      </Group>
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm" ff="monospace">
                        {n.build}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <Group gap={4} wrap="nowrap">
                        <Text size="sm">v{n.version}</Text>
                        {st && st !== 'current' && <Badge color={statusColor[st]}>{st}</Badge>}
                      </Group>
                    </Table.Td>
                    <Table.Td title={n.source}>{sourceLabel(n.source)}</Table.Td>
                    <Table.Td>
                      {n.lastApplyError && (
                        <Tooltip label={n.lastApplyError} multiline maw={400}>
                          <Text size="sm" c="red.8" lineClamp={2}>
                            {n.lastApplyError}
                          </Text>
                        </Tooltip>
                      )}
                    </Table.Td>
                    <Table.Td>{n.live ? 'now' : <When t={n.lastSeen} />}</Table.Td>
                    <Table.Td ta="right">{n.rps === undefined ? '' : n.rps.toFixed(1)}</Table.Td>
                    <Table.Td ta="right">{pct(n.rejectRate)}</Table.Td>
                    <Table.Td ta="right">{ms(n.p99Seconds)}</Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Page>
  );
}
