import { Alert, Badge, Button, Group, NativeSelect, Paper, SimpleGrid, Stack, Switch, Table, Text, Textarea, TextInput, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useMemo, useState, type ReactNode } from 'react';
import { useParams } from 'react-router';
import type { Node } from '../../api/client';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { StreamBadge } from '../../components/StreamBadge';
import { allows, useMe } from '../auth/session';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useNodes } from '../namespaces/hooks';
import { useStats } from '../traffic/hooks';
import { stepSeconds } from '../traffic/series';
import { useVersionDoc, useVersions } from '../versions/hooks';
import { useClearOverride, useSetOverride } from './hooks';
import { formatLabels } from './labels';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { overrideText } from '../audit/describe';
import { overrideBody, servingOthers, ttlError } from './override';
import { ms, NodeKindBadge, NodeState, pct, sourceLabel, statusColor } from './NodesPage';

function OverrideForm({ ns, node, degrades, others }: { ns: string; node: Node; degrades: string[]; others: number }) {
  const id = node.nodeId ?? '';
  const set = useSetOverride(ns, id);
  const clear = useClearOverride(ns, id);
  const o = node.override;
  const [drain, setDrain] = useState(o?.drain ?? false);
  const [levels, setLevels] = useState<Record<string, string>>(() => Object.fromEntries(Object.entries(o?.degradeLevels ?? {}).map(([k, v]) => [k, String(v)])));
  const [ttl, setTtl] = useState('15m');
  const [reason, setReason] = useState('');
  const body = overrideBody(drain, levels, ttl, reason);
  const tErr = ttlError(ttl);
  const nothing = body === undefined;
  // Both reach the node at once: each is confirmed in a dialog naming the node and what it does.
  const [confirming, setConfirming] = useState<'set' | 'clear' | null>(null);
  const close = () => setConfirming(null);
  return (
    <Paper withBorder p="md" component="form" aria-label="Override" onSubmit={(e) => {
      e.preventDefault();
      if (body) setConfirming('set');
    }}>
      <Stack gap="sm">
        <Title order={2} size="h4">
          Override
        </Title>
        {o ? (
          <Alert color="orange" title="Active override" role="status">
            <Text size="sm">
              {o.drain ? 'Draining. ' : ''}
              {Object.entries(o.degradeLevels ?? {}).map(([k, v]) => `${k} forced to level ${v}`).join(', ')}
              {o.expires ? ` Until ${when(o.expires)}.` : ' Until cleared.'} By {o.by}
              {o.reason ? `: ${o.reason}` : ''}
            </Text>
          </Alert>
        ) : (
          <Text size="sm" c="dimmed">
            No override: the node follows its rules.
          </Text>
        )}
        <Switch label="Drain this node" checked={drain} onChange={(e) => setDrain(e.currentTarget.checked)} />
        {degrades.length > 0 && (
          <SimpleGrid cols={{ base: 1, sm: 3 }}>
            {degrades.map((d) => (
              <NativeSelect
                key={d}
                label={`Degrade level of ${d}`}
                value={levels[d] ?? ''}
                onChange={(e) => setLevels({ ...levels, [d]: e.currentTarget.value })}
                data={[{ value: '', label: 'not forced' }, { value: '0', label: '0 (normal)' }, { value: '1', label: '1 (shed)' }, { value: '2', label: '2 (fallback)' }]}
              />
            ))}
          </SimpleGrid>
        )}
        <Group align="flex-start" wrap="wrap">
          <TextInput label="TTL" description="e.g. 15m or 2h, at most 30 days; empty: until cleared" value={ttl} onChange={(e) => setTtl(e.currentTarget.value)} error={tErr} w={260} />
          <Textarea label="Reason" required value={reason} onChange={(e) => setReason(e.currentTarget.value)} autosize minRows={1} style={{ flex: 1, minWidth: 240 }} />
        </Group>
        <ErrorAlert error={set.error ?? clear.error} />
        <Group>
          <Button type="submit" disabled={nothing || !!tErr || reason.trim() === ''} loading={set.isPending}>
            Save override
          </Button>
          {o && (
            <Button variant="default" onClick={() => setConfirming('clear')} loading={clear.isPending}>
              Clear override
            </Button>
          )}
        </Group>
        {body && (
          <ConfirmDialog opened={confirming === 'set'} title={`Override node ${id}?`} confirm="Save override" color={body.drain ? 'red' : undefined} loading={set.isPending} error={set.error} onClose={close} onConfirm={() => set.mutate(body, { onSuccess: close })}>
            <Text size="sm">
              Node {id} of {ns}: {overrideText('node.override', body)}, {body.ttl ? `for ${body.ttl}` : 'until cleared'}. Reason: {body.reason}
            </Text>
            {body.drain && others === 0 && (
              <Alert color="red" role="alert" title="This is the last live node">
                No other live node serves {ns}: draining {id} leaves none ready for traffic.
              </Alert>
            )}
          </ConfirmDialog>
        )}
        {o && (
          <ConfirmDialog opened={confirming === 'clear'} title={`Clear the override on ${id}?`} confirm="Clear override" loading={clear.isPending} error={clear.error} onClose={close} onConfirm={() => clear.mutate(undefined, { onSuccess: close })}>
            <Text size="sm">
              Node {id} of {ns} follows its rules again: {overrideText('node.override', o)} ends.
            </Text>
          </ConfirmDialog>
        )}
        {nothing && <Text size="xs" c="dimmed">Drain the node or force a degrade level to save an override.</Text>}
      </Stack>
    </Paper>
  );
}

function RuleStates({ ns, id, node }: { ns: string; id: string; node: Node }) {
  const stats = useStats(ns, 300, id);
  const step = stepSeconds(stats.data?.step);
  const breakers = node.report?.breakers;
  const degrades = node.report?.degrades;
  const forced = node.override?.degradeLevels;
  const rows = useMemo(() => {
    const out = new Map<string, { rule: string; kind: string; last?: number[]; sum?: number[] }>();
    for (const s of stats.data?.series ?? []) {
      if (s.node && s.node !== id) continue;
      const last = s.points[s.points.length - 1];
      const sum = s.points.reduce((a, p) => [a[0] + Math.max(0, p[1]), a[1] + Math.max(0, p[2]), a[2] + Math.max(0, p[3])], [0, 0, 0]);
      out.set(`${s.kind} ${s.rule}`, { rule: s.rule, kind: s.kind, last, sum });
    }
    // Rules the last report names without traffic still show their state.
    for (const r of Object.keys(breakers ?? {})) if (!out.has(`breaker ${r}`)) out.set(`breaker ${r}`, { rule: r, kind: 'breaker' });
    for (const r of Object.keys(degrades ?? {})) if (!out.has(`degrade ${r}`)) out.set(`degrade ${r}`, { rule: r, kind: 'degrade' });
    return [...out.values()].sort((a, b) => a.rule.localeCompare(b.rule) || a.kind.localeCompare(b.kind));
  }, [stats.data, id, breakers, degrades]);
  const stateOf = (r: { rule: string; kind: string }): string => {
    if (r.kind === 'breaker') return breakers?.[r.rule] ?? '';
    if (r.kind === 'degrade') {
      const lvl = degrades?.[r.rule];
      const f = forced?.[r.rule];
      return `${lvl === undefined ? '' : `level ${lvl}`}${f === undefined ? '' : ` (forced ${f})`}`;
    }
    return '';
  };
  return (
    <Paper withBorder p="md" component="section" aria-label="Rule states">
      <Title order={2} size="h4" mb="xs">
        Rules on this node (last 5 minutes)
      </Title>
      {stats.isPending && <Loading />}
      <ErrorAlert error={stats.error} title="Stats unavailable" />
      {stats.data && rows.length === 0 && <Text c="dimmed">This node reported no rule traffic or state in the last 5 minutes.</Text>}
      {rows.length > 0 && (
        <Table aria-label="Rules on this node">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Rule</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th ta="right">Allowed/s (latest)</Table.Th>
              <Table.Th ta="right">Rejected/s (latest)</Table.Th>
              <Table.Th ta="right">Shed/s (latest)</Table.Th>
              <Table.Th ta="right">Allowed / rejected / shed (5 min)</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((r) => (
              <Table.Tr key={r.rule}>
                <Table.Td>
                  {r.kind} {r.rule}
                </Table.Td>
                <Table.Td>{stateOf(r)}</Table.Td>
                <Table.Td ta="right">{r.last ? (r.last[1] / step).toFixed(2) : ''}</Table.Td>
                <Table.Td ta="right">{r.last ? (r.last[2] / step).toFixed(2) : ''}</Table.Td>
                <Table.Td ta="right">{r.last ? (r.last[3] / step).toFixed(2) : ''}</Table.Td>
                <Table.Td ta="right">{r.sum ? `${r.sum[0]} / ${r.sum[1]} / ${r.sum[2]}` : ''}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}

export function NodePage() {
  const params = useParams();
  const ns = params.ns!;
  const id = params.id!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const me = useMe();
  const nodes = useNodes(ns);
  const versions = useVersions(ns, 1);
  const n = (nodes.data?.items ?? []).find((x) => x.nodeId === id);
  const published = n?.publishedVersion ?? versions.data?.items?.[0]?.number;
  const doc = useVersionDoc(ns, published);
  const degrades = (doc.data?.degrades ?? []).map((d) => d.id);
  const crumbs = [...nsCrumbs(ns), { to: `/namespaces/${ns}/nodes`, label: 'Nodes' }];

  if (nodes.isPending) return <Loading />;
  if (!n)
    return (
      <Page title={`Node ${id}`} crumbs={crumbs} actions={<NamespaceNav ns={ns} />}>
        <ErrorAlert error={nodes.error} />
        {!nodes.error && <Alert color="gray">No node {id} follows this namespace (or it is gone past the retention).</Alert>}
      </Page>
    );
  const st = n.versionState;
  const facts: [string, ReactNode][] = [
    ['Kind', <NodeKindBadge key="k" n={n} />],
    ['State', <NodeState key="s" n={n} />],
    ['Labels', formatLabels(n.labels) || '(none)'],
    ['Build', n.build],
    ['Version', <>v{n.version} {st && st !== 'current' && <Badge ml={4} color={statusColor[st]}>{st}</Badge>} {published !== undefined && <Text span size="sm" c="dimmed">(published v{published})</Text>}</>],
    ['Applied', when(n.appliedAt)],
    ['Source', sourceLabel(n.source)],
    ['Last apply error', n.lastApplyError || 'none'],
    ['Address', n.address],
    ['Started', when(n.startedAt)],
    ['Last seen', n.live ? 'now' : when(n.lastSeen)],
    ['Requests/s', n.rps?.toFixed(1)],
    ['Reject rate', pct(n.rejectRate)],
    ['p99', ms(n.p99Seconds)],
    ['5xx rate', pct(n.report?.errorRate5xx)],
    ['Last report', when(n.report?.at)],
  ];
  return (
    <Page title={`Node ${id}`} crumbs={crumbs} actions={<Group gap="sm"><NamespaceNav ns={ns} /><StreamBadge state={stream} /></Group>}>
      <Paper withBorder p="md">
        <Table aria-label="Node" variant="vertical" withRowBorders={false}>
          <Table.Tbody>
            {facts.map(([k, v]) => (
              <Table.Tr key={k}>
                <Table.Th w={180}>{k}</Table.Th>
                <Table.Td>{v}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Paper>
      <RuleStates ns={ns} id={id} node={n} />
      {allows(me.data?.role, 'approver') ? (
        <OverrideForm key={`${n.override?.revision ?? 0}`} ns={ns} node={n} degrades={degrades} others={servingOthers(nodes.data?.items ?? [], id)} />
      ) : (
        <Text size="sm" c="dimmed">
          Overrides (drain, forced degrade levels) need the approver role.
        </Text>
      )}
    </Page>
  );
}
