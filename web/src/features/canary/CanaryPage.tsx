import { Alert, Anchor, Badge, Button, Group, NativeSelect, Paper, Stack, Table, Text, Textarea, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import type { FleetEvent } from '../../api/fleet';
import { Link, useParams } from 'react-router';
import type { CanaryAnalysis, CanaryComparison, CohortFigures } from '../../api/fleet';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { absolute, plural } from '../../components/format';
import { Loading, Page, When, when } from '../../components/Page';
import { StreamBadge } from '../../components/StreamBadge';
import { allows, useMe } from '../auth/session';
import { useChanges } from '../changes/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useCanary } from '../nodes/hooks';
import { useNodes } from '../namespaces/hooks';
import { comparisonRows } from './analysis';
import { CanaryFields, CanaryScope, useCanaryOptions } from './CanaryForm';
import { CanaryStatus } from './CanaryStatus';
import { useEndCanary, usePublishCanary } from './hooks';
import { useEvents } from '../events/hooks';

const stateColor: Record<string, string> = { waiting: 'gray', running: 'blue', passed: 'green', breached: 'red', held: 'yellow' };

const nodes = (f: CohortFigures | undefined) => {
  const n = f?.nodes?.length ?? 0;
  return `${n} node${n === 1 ? '' : 's'}`;
};

function Comparison({ title, canary, baseline, c, a, judged }: { title: string; canary?: CohortFigures; baseline?: CohortFigures; c?: CanaryComparison; a?: CanaryAnalysis; judged: boolean }) {
  const rows = comparisonRows(canary, baseline, c, a, judged);
  return (
    <Table aria-label={title} withTableBorder>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>{title}</Table.Th>
          <Table.Th ta="right">Canary ({nodes(canary)})</Table.Th>
          <Table.Th ta="right">Baseline ({nodes(baseline)})</Table.Th>
          <Table.Th ta="right">Change</Table.Th>
          <Table.Th>Limit</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {rows.map((r) => (
          <Table.Tr key={r.metric} bg={r.breached ? 'red.0' : undefined} aria-label={`${r.label}${r.breached ? ' (breached)' : ''}`}>
            <Table.Td>
              {r.label} {r.breached && <Badge color="red">breached</Badge>}
            </Table.Td>
            <Table.Td ta="right">{r.canary}</Table.Td>
            <Table.Td ta="right">{r.baseline}</Table.Td>
            <Table.Td ta="right">{r.change}</Table.Td>
            <Table.Td>{r.limit}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function PublishCanary({ ns }: { ns: string }) {
  const approved = useChanges(ns, 'approved');
  const publish = usePublishCanary(ns);
  const changes = (approved.data?.items ?? []).filter((c) => !c.stale);
  const [id, setId] = useState('');
  const o = useCanaryOptions();
  const chosen = id || (changes[0] ? String(changes[0].id) : '');
  const ok = chosen !== '' && o.ok;
  // The confirmation names the scope: the change, the selector and the live nodes it matches now.
  const nodes = useNodes(ns);
  const [confirming, setConfirming] = useState(false);
  const change = changes.find((c) => String(c.id) === chosen);
  return (
    <Paper withBorder p="md" component="form" aria-label="Publish a canary" onSubmit={(e) => {
      e.preventDefault();
      if (ok) setConfirming(true);
    }}>
      <Stack gap="sm">
        <Title order={2} size="h4">
          Publish a change as a canary
        </Title>
        {approved.data && changes.length === 0 ? (
          <Text size="sm" c="dimmed">
            No approved change to publish. An approver approves a change first.
          </Text>
        ) : (
          <>
            <NativeSelect label="Change" value={chosen} onChange={(e) => setId(e.currentTarget.value)} data={changes.map((c) => ({ value: String(c.id), label: `#${c.id} ${c.title}` }))} w={320} />
            <CanaryFields o={o} />
            <ErrorAlert error={publish.error} />
            <Group>
              <Button type="submit" disabled={!ok} loading={publish.isPending}>
                Publish canary
              </Button>
            </Group>
            {ok && (
              <ConfirmDialog
                opened={confirming}
                title={`Publish #${chosen} as a canary?`}
                confirm="Publish canary"
                loading={publish.isPending}
                error={publish.error}
                onClose={() => setConfirming(false)}
                onConfirm={() => publish.mutate({ id: Number(chosen), selector: o.selector!, analysis: o.analysis }, { onSuccess: () => setConfirming(false) })}
              >
                {change && <Text size="sm">“{change.title}”</Text>}
                <CanaryScope ns={ns} o={o} nodes={nodes.data?.items} />
              </ConfirmDialog>
            )}
          </>
        )}
      </Stack>
    </Paper>
  );
}

/** canaryReason is the reason an ended canary's event records (the analyser writes its figures there). */
export function canaryReason(e: FleetEvent): string {
  const after = (e.detail as { after?: { reason?: unknown } } | undefined)?.after;
  return typeof after?.reason === 'string' ? after.reason : '';
}

const verb: Record<string, string> = { start: 'started', promote: 'promoted', abort: 'aborted' };

function RecentCanaries({ ns }: { ns: string }) {
  const [since] = useState(() => new Date(Date.now() - 30 * 24 * 3600_000).toISOString());
  const q = useEvents(ns, { kind: 'canary', since });
  const items = (q.data?.pages[0]?.items ?? []).slice(0, 10);
  return (
    <Paper withBorder p="md" component="section" aria-label="Recent canaries">
      <Title order={2} size="h4" mb="xs">
        Recent canaries
      </Title>
      <ErrorAlert error={q.error} />
      {q.data && items.length === 0 && <Text c="dimmed">No canary in the last 30 days.</Text>}
      {items.length > 0 && (
        <Table aria-label="Recent canaries">
          <Table.Tbody>
            {items.map((e) => (
              <Table.Tr key={e.id}>
                <Table.Td style={{ whiteSpace: 'nowrap' }}><When t={e.at} /></Table.Td>
                <Table.Td>
                  {e.version !== undefined ? `v${e.version} ` : ''}
                  {verb[e.to ?? ''] ?? e.to} by {e.actor}
                </Table.Td>
                <Table.Td>
                  <Text size="sm" className="pre-wrap">
                    {canaryReason(e)}
                  </Text>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}

export function CanaryPage() {
  const ns = useParams().ns!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const me = useMe();
  const q = useCanary(ns, 2_000);
  const end = useEndCanary(ns);
  const [reason, setReason] = useState('');
  const [confirming, setConfirming] = useState<'promote' | 'abort' | null>(null);
  const canApprove = allows(me.data?.role, 'approver');
  const c = q.data;
  const cmp = c?.comparison;
  const selectorText = Object.entries(c?.selector ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');

  return (
    <Page title="Canary" crumbs={nsCrumbs(ns)} actions={<Group gap="sm"><NamespaceNav ns={ns} /><StreamBadge state={stream} /></Group>}>
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error} />
      {q.data === null && (
        <Alert color="gray" role="status">
          No canary is running in this namespace.
        </Alert>
      )}
      {c && (
        <Paper withBorder p="md" component="section" aria-label="Active canary">
          <Stack gap="sm">
            <Group gap="sm" wrap="wrap">
              <Title order={2} size="h4">
                <Anchor component={Link} to={`/namespaces/${ns}/versions/${c.version}`}>
                  Version {c.version}
                </Anchor>{' '}
                on {Object.entries(c.selector ?? {}).map(([k, v]) => `${k}=${v}`).join(', ')}
              </Title>
              <Badge>{c.state}</Badge>
              {cmp?.state && (
                <Badge color={stateColor[cmp.state] ?? 'gray'} aria-label={`Analysis ${cmp.state}`}>
                  analysis: {cmp.state}
                </Badge>
              )}
              {cmp?.verdict && <Badge variant="outline" color={cmp.verdict === 'breach' ? 'red' : cmp.verdict === 'pass' ? 'green' : 'gray'}>last window: {cmp.verdict}</Badge>}
            </Group>
            <CanaryStatus ns={ns} link={false} />
            <Text size="sm">
              Started {when(c.createdAt)} by {c.createdBy}
              {c.analysis ? `; judged every ${c.analysis.window ?? '60s'}, on pass ${c.analysis.onPass ?? 'hold'}` : '; no automatic analysis: promote or abort by hand'}
              {cmp?.windows ? `; ${cmp.windows} window${cmp.windows === 1 ? '' : 's'} judged` : ''}.
            </Text>
            {(c.nodes ?? []).length > 0 && (
              <Group gap={4}>
                <Text size="sm">Nodes:</Text>
                {(c.nodes ?? []).map((n) => (
                  <Badge key={n.nodeId} color={n.applied ? 'green' : 'gray'} variant="light" tt="none">
                    {n.nodeId} {n.applied ? `v${n.version}` : `waiting (v${n.version})`}
                  </Badge>
                ))}
              </Group>
            )}
            {c.nodesError && <Text size="sm" c="orange">Nodes unavailable: {c.nodesError}</Text>}
            {cmp && (
              <>
                {(cmp.windows ?? 0) > 0 && <Comparison
                  title={`Last judged window${cmp.windowStart ? ` (${absolute(cmp.windowStart)} – ${absolute(cmp.windowEnd)})` : ''}`}
                  canary={cmp.canary}
                  baseline={cmp.baseline}
                  c={cmp}
                  a={c.analysis}
                  judged
                />}
                {cmp.current && <Comparison title="Window in progress" canary={cmp.current.canary} baseline={cmp.current.baseline} c={cmp} a={c.analysis} judged={false} />}
              </>
            )}
            {canApprove && c.state === 'active' && (
              <Stack gap="xs">
                <Textarea label="Reason" value={reason} onChange={(e) => setReason(e.currentTarget.value)} autosize minRows={1} />
                <Group>
                  <Button color="teal" onClick={() => setConfirming('promote')} loading={end.isPending && end.variables?.action === 'promote'}>
                    Promote to all nodes
                  </Button>
                  <Button color="red" variant="light" onClick={() => setConfirming('abort')} loading={end.isPending && end.variables?.action === 'abort'}>
                    Abort canary
                  </Button>
                </Group>
                <ConfirmDialog
                  opened={confirming !== null}
                  title={confirming === 'promote' ? `Promote v${c.version} to all nodes?` : `Abort the canary of v${c.version}?`}
                  confirm={confirming === 'promote' ? 'Promote' : 'Abort canary'}
                  color={confirming === 'promote' ? 'teal' : 'red'}
                  loading={end.isPending}
                  error={end.error}
                  onClose={() => setConfirming(null)}
                  onConfirm={() => confirming && end.mutate({ action: confirming, reason }, { onSuccess: () => setConfirming(null) })}
                >
                  <Text size="sm">
                    {confirming === 'promote'
                      ? `Every node of ${ns} runs v${c.version}, not only the ${plural((c.nodes ?? []).length, 'node')} on ${selectorText}.`
                      : `${plural((c.nodes ?? []).length, 'node')} on ${selectorText} ${(c.nodes ?? []).length === 1 ? 'returns' : 'return'} to the fleet's version; v${c.version} runs nowhere.`}
                    {reason.trim() ? ` Reason: ${reason.trim()}` : ''}
                  </Text>
                </ConfirmDialog>
              </Stack>
            )}
            <ErrorAlert error={end.error} />
          </Stack>
        </Paper>
      )}
      {end.data && (
        <Alert color={end.data.state === 'promoted' ? 'green' : 'orange'} role="status">
          Canary v{end.data.version} {end.data.state}.
        </Alert>
      )}
      {q.data === null && canApprove && <PublishCanary ns={ns} />}
      {q.data === null && !canApprove && <Text size="sm" c="dimmed">Publishing a canary needs the approver role.</Text>}
      <RecentCanaries ns={ns} />
    </Page>
  );
}
