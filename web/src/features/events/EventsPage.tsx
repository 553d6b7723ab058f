import { Anchor, Badge, Button, Group, NativeSelect, Table, Text, TextInput } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { eventKinds } from '../../api/fleet';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, When } from '../../components/Page';
import { StreamBadge } from '../../components/StreamBadge';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { change, detailText, reason, show } from './format';
import { useEvents } from './hooks';

const kindColor: Record<string, string> = {
  degrade: 'orange',
  breaker: 'red',
  publish: 'blue',
  rollback: 'grape',
  canary: 'yellow',
  override: 'pink',
  node_joined: 'teal',
  node_left: 'gray',
  apply_error: 'red',
  draft: 'gray',
};

function local(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function EventsPage() {
  const ns = useParams().ns!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const [search, setSearch] = useSearchParams();
  const [defaultSince] = useState(() => local(new Date(Date.now() - 24 * 3600_000)));
  const kind = search.get('kind') ?? '';
  const node = search.get('node') ?? '';
  const rule = search.get('rule') ?? '';
  const sinceLocal = search.get('since') ?? defaultSince;
  const since = new Date(sinceLocal);
  const sinceValid = !Number.isNaN(since.getTime());
  const q = useEvents(ns, { kind: kind || undefined, node: node || undefined, rule: rule || undefined, since: sinceValid ? since.toISOString() : new Date(0).toISOString() });
  const set = (k: string, v: string) =>
    setSearch(
      (p) => {
        const n = new URLSearchParams(p);
        if (v === '') n.delete(k);
        else n.set(k, v);
        return n;
      },
      { replace: true },
    );
  // The server filters; the same filter here keeps a page honest if it sent more.
  const items = useMemo(
    () => (q.data?.pages ?? []).flatMap((p) => p.items ?? []).filter((e) => (!kind || e.kind === kind) && (!node || e.node === node) && (!rule || e.rule === rule)),
    [q.data, kind, node, rule],
  );

  return (
    <Page title="Events" crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      <Group align="flex-end" wrap="wrap" role="search" aria-label="Event filters">
        <NativeSelect label="Kind" value={kind} onChange={(e) => set('kind', e.currentTarget.value)} data={[{ value: '', label: 'all kinds' }, ...eventKinds.map((k) => ({ value: k, label: k.replace('_', ' ') }))]} />
        <TextInput label="Node" value={node} onChange={(e) => set('node', e.currentTarget.value.trim())} w={180} />
        <TextInput label="Rule" value={rule} onChange={(e) => set('rule', e.currentTarget.value.trim())} w={180} />
        <TextInput type="datetime-local" label="Since" value={sinceLocal} onChange={(e) => set('since', e.currentTarget.value)} error={sinceValid ? undefined : 'a date and time'} />
        <StreamBadge state={stream} />
      </Group>
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error} />
      {q.data && items.length === 0 && <Text>No events match.</Text>}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={900}>
          <Table aria-label="Events" striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Time</Table.Th>
                <Table.Th>Kind</Table.Th>
                <Table.Th>Node</Table.Th>
                <Table.Th>Rule</Table.Th>
                <Table.Th>Change</Table.Th>
                <Table.Th>Actor</Table.Th>
                <Table.Th>Reason</Table.Th>
                <Table.Th>Detail</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((e) => (
                <Table.Tr key={String(e.id)}>
                  <Table.Td>
                    <Text size="sm" style={{ whiteSpace: 'nowrap' }}>
                      <When t={e.at} />
                    </Text>
                  </Table.Td>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>
                    <Badge color={kindColor[e.kind] ?? 'gray'} style={{ overflow: 'visible' }}>
                      {e.kind.replace('_', ' ')}
                    </Badge>
                  </Table.Td>
                  <Table.Td>
                    {e.node && (
                      <Anchor component={Link} to={`/namespaces/${ns}/nodes/${encodeURIComponent(e.node)}`} size="sm">
                        {e.node}
                      </Anchor>
                    )}
                  </Table.Td>
                  <Table.Td>{e.rule}</Table.Td>
                  <Table.Td>
                    {e.version !== undefined && (e.kind === 'publish' || e.kind === 'rollback' || e.kind === 'canary') ? (
                      <Anchor component={Link} to={`/namespaces/${ns}/versions/${e.version}`} size="sm">
                        {change(e)}
                      </Anchor>
                    ) : (
                      change(e)
                    )}
                  </Table.Td>
                  <Table.Td>{e.actor}</Table.Td>
                  <Table.Td>{reason(e)}</Table.Td>
                  <Table.Td maw={420} title={show(e.detail)}>
                    <Text size="xs" ff="monospace" lineClamp={2} style={{ wordBreak: 'break-word' }}>
                      {detailText(e.detail)}
                    </Text>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {q.hasNextPage && (
        <Button variant="default" onClick={() => q.fetchNextPage()} loading={q.isFetchingNextPage} style={{ alignSelf: 'flex-start' }}>
          Load older events
        </Button>
      )}
    </Page>
  );
}
