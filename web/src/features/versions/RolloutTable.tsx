import { Anchor, Badge, Paper, Table, Text, Title } from '@mantine/core';
import { Link } from 'react-router';
import { ErrorAlert } from '../../components/ErrorAlert';
import { when } from '../../components/Page';
import { useRollout } from './hooks';

/** delay formats a rollout delay in seconds for people. */
export function delay(s: number | undefined): string {
  if (s === undefined) return '';
  if (s < 0) return '0 s';
  if (s < 10) return `${s.toFixed(2)} s`;
  if (s < 120) return `${s.toFixed(0)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** RolloutTable is the rollout of version n: which nodes applied it and how long after publish, and who has not. */
export function RolloutTable({ ns, n }: { ns: string; n: number }) {
  const r = useRollout(ns, n);
  const applied = [...(r.data?.applied ?? [])].sort((a, b) => (a.delaySeconds ?? 0) - (b.delaySeconds ?? 0));
  const waiting = r.data?.waiting ?? [];
  return (
    <Paper withBorder p="md" component="section" aria-label="Rollout">
      <Title order={2} size="h4" mb="xs">
        Rollout
      </Title>
      <ErrorAlert error={r.error} title="Rollout unavailable" />
      {r.data && !r.data.publishedAt && <Text c="dimmed">Version {n} was never written to etcd.</Text>}
      {r.data?.publishedAt && (
        <Text size="sm" mb="xs">
          Published {when(r.data.publishedAt)}
          {r.data.canaryAt ? ` (as a canary ${when(r.data.canaryAt)}${r.data.rulesetAt ? `, to all ${when(r.data.rulesetAt)}` : ''})` : ''}; applied by {applied.length} node{applied.length === 1 ? '' : 's'}
          {waiting.length ? `, ${waiting.length} live node${waiting.length === 1 ? '' : 's'} not (yet)` : ''}.
        </Text>
      )}
      {(applied.length > 0 || waiting.length > 0) && (
        <Table aria-label={`Rollout of version ${n}`}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Node</Table.Th>
              <Table.Th>Applied</Table.Th>
              <Table.Th ta="right">After publish</Table.Th>
              <Table.Th>Now</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {applied.map((a) => (
              <Table.Tr key={a.nodeId}>
                <Table.Td>
                  <Anchor component={Link} to={`/namespaces/${ns}/nodes/${encodeURIComponent(a.nodeId ?? '')}`} size="sm">
                    {a.nodeId}
                  </Anchor>
                </Table.Td>
                <Table.Td>{when(a.firstSeen)}</Table.Td>
                <Table.Td ta="right">{delay(a.delaySeconds)}</Table.Td>
                <Table.Td>{!a.live ? <Badge color="gray">gone</Badge> : a.current ? <Badge color="green">runs it</Badge> : <Badge color="blue">moved on</Badge>}</Table.Td>
              </Table.Tr>
            ))}
            {waiting.map((w) => (
              <Table.Tr key={`w-${w.nodeId}`}>
                <Table.Td>{w.nodeId}</Table.Td>
                <Table.Td colSpan={2}>
                  <Text size="sm" c={w.lastApplyError ? 'red.8' : 'dimmed'}>
                    {w.lastApplyError ? `refused: ${w.lastApplyError}` : `not applied (runs v${w.version})`}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Badge color="orange">waiting</Badge>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}
