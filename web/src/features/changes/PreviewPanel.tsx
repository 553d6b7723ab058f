// The change page's preview on live traffic: the form that starts one
// (editor and up), the per-rule figures the nodes report while it runs,
// refreshed every few seconds, with a Stop button, and the review box's
// summary for the approver. The figures' shaping is preview.ts's.
import { Alert, Anchor, Badge, Button, Group, List, Paper, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import type { Limit } from '../../api/client';
import { ErrorAlert } from '../../components/ErrorAlert';
import { plural } from '../../components/format';
import { when } from '../../components/Page';
import { formatLabels } from '../nodes/labels';
import { usePreview, useStartPreview, useStopPreview } from './hooks';
import {
  conflictChange,
  count,
  defaultPreviewDuration,
  durationError,
  endedLine,
  fieldErrors,
  pct,
  previewRows,
  previewSelector,
  startErrorTitle,
  summaryLine,
  timeLeft,
  type PreviewRow,
  type PreviewView,
  type Rate,
} from './preview';

// Shades dark enough for white text (WCAG AA, checked with axe).
const stateColor: Record<string, string> = { running: 'blue.8', done: 'gray.7', stopped: 'gray.7', finished: 'gray.7' };

/** useNow is the time, updated every second while on. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

// Input descriptions a shade darker than Mantine's dimmed (WCAG AA contrast).
const readable = { description: { color: 'var(--mantine-color-gray-7)' } };

function PreviewForm({ ns, id, restart }: { ns: string; id: number; restart: boolean }) {
  const start = useStartPreview(ns, id);
  const [duration, setDuration] = useState(defaultPreviewDuration);
  const [selText, setSelText] = useState('');
  const dErr = durationError(duration);
  const sel = previewSelector(selText);
  const server = fieldErrors(start.error);
  const ok = !dErr && !sel.error;
  const blocking = conflictChange(start.error);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!ok) return;
    start.mutate({ duration: duration.trim(), selector: sel.selector! });
  };
  return (
    <form aria-label="Start a preview" onSubmit={submit} noValidate>
      <Stack gap="sm">
        <Group align="flex-start" wrap="wrap">
          <TextInput
            label="Duration"
            description="How long it runs: at most 30m"
            value={duration}
            onChange={(e) => {
              setDuration(e.currentTarget.value);
              start.reset();
            }}
            error={dErr ?? server.duration}
            styles={readable}
            w={220}
            required
          />
          <TextInput
            label="Node selector"
            description="Labels the nodes must all have, e.g. zone=a; empty: every node"
            placeholder="every node"
            value={selText}
            onChange={(e) => {
              setSelText(e.currentTarget.value);
              start.reset();
            }}
            error={sel.error ?? server.selector}
            styles={readable}
            w={{ base: '100%', xs: 360 }}
          />
        </Group>
        <ErrorAlert error={start.error} title={startErrorTitle(start.error)} />
        {blocking !== undefined && (
          <Anchor component={Link} to={`/namespaces/${ns}/changes/${blocking}`} size="sm">
            Open change #{blocking} to see or stop its preview
          </Anchor>
        )}
        <Group>
          <Button type="submit" color="blue.8" disabled={!ok} loading={start.isPending}>
            {restart ? 'Preview on live traffic again' : 'Preview on live traffic'}
          </Button>
        </Group>
      </Stack>
    </form>
  );
}

function RateCell({ r, label, strong }: { r: Rate; label: string; strong?: boolean }) {
  return (
    <Table.Td role="cell" data-label={label}>
      <div>
        <Text size="sm" fw={strong ? 700 : undefined} c={strong ? 'red.9' : undefined} span>
          {pct(r.rate)}
        </Text>
        <Text size="xs" c="gray.7">
          {r.requests > 0 ? `${count(r.rejected)} of ${count(r.requests)}` : 'no requests'}
          {r.shadow > 0 ? `; ${count(r.shadow)} shadow` : ''}
        </Text>
      </div>
    </Table.Td>
  );
}

function affected(r: PreviewRow): string {
  if (r.preview.rejected + r.preview.shadow === 0) return '0';
  if (r.noun === undefined) return 'all (one global key)';
  if (r.clients) return `${r.clients.approximate ? '≈ ' : ''}${plural(r.clients.count, r.noun)}`;
  if (r.keys === 0) return 'not sampled yet';
  return `≥ ${plural(r.keys, r.noun)}`;
}

function PreviewTable({ rows }: { rows: PreviewRow[] }) {
  return (
    <Table aria-label="Preview figures per rule" className="stack-table" role="table" verticalSpacing={6}>
      <Table.Thead role="rowgroup">
        <Table.Tr role="row">
          <Table.Th role="columnheader">Rule</Table.Th>
          <Table.Th role="columnheader">Rejected today</Table.Th>
          <Table.Th role="columnheader">Rejected if approved</Table.Th>
          <Table.Th role="columnheader">Clients affected</Table.Th>
          <Table.Th role="columnheader">Top rejected keys</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody role="rowgroup">
        {rows.map((r) => (
          <Table.Tr key={`${r.kind}/${r.rule}`} role="row" aria-label={`${r.kind} ${r.rule}`}>
            <Table.Td role="cell" data-label="Rule">
              <div>
                <Group gap={6} wrap="wrap">
                  <Text size="sm" ff="monospace" style={{ wordBreak: 'break-all' }}>
                    {r.rule}
                  </Text>
                  {r.kind !== 'limit' && (
                    <Badge variant="outline" color="blue.9">
                      {r.kind}
                    </Badge>
                  )}
                  {r.approximate && (
                    <Badge variant="light" color="yellow" c="dark.7" title="A cluster limit: each node judged it alone, its rate divided by the live nodes">
                      ≈ approximate
                    </Badge>
                  )}
                </Group>
                {r.extras.map((x) => (
                  <Text key={x} size="xs" c="gray.7">
                    {x}
                  </Text>
                ))}
              </div>
            </Table.Td>
            <RateCell r={r.live} label="Rejected today" />
            <RateCell r={r.preview} label="If approved" strong={r.worse} />
            <Table.Td role="cell" data-label="Clients affected">
              <Text size="sm">{affected(r)}</Text>
            </Table.Td>
            <Table.Td role="cell" data-label="Top rejected keys">
              {r.topKeys.length === 0 ? (
                <Text size="sm" c="gray.7">
                  none
                </Text>
              ) : (
                <List size="xs" listStyleType="none" spacing={2}>
                  {r.topKeys.slice(0, 5).map((k) => (
                    <List.Item key={k.key}>
                      <Text span size="xs" ff="monospace" style={{ wordBreak: 'break-all' }}>
                        {k.key}
                      </Text>{' '}
                      {k.info.hashed && (
                        <Badge size="xs" variant="outline" color="gray.7" title="Header, query, cookie and claim values are shown as a hash of the value, as in the decision log">
                          hashed
                        </Badge>
                      )}{' '}
                      {k.info.truncated && (
                        <Badge size="xs" variant="outline" color="gray.7" title="Cut to 64 bytes; the end is a hash of the whole key">
                          truncated
                        </Badge>
                      )}{' '}
                      <Text span size="xs" c="gray.7">
                        × {count(k.rejected)}
                      </Text>
                    </List.Item>
                  ))}
                </List>
              )}
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function where(p: PreviewView): string {
  const sel = formatLabels(p.selector);
  return sel ? `nodes with ${sel}` : 'every node';
}

function PreviewFigures({ ns, id, p, limits, canEdit }: { ns: string; id: number; p: PreviewView; limits: Limit[] | undefined; canEdit: boolean }) {
  const stop = useStopPreview(ns, id);
  const running = p.state === 'running' && !p.kept;
  const now = useNow(running);
  const rows = previewRows(p, limits);
  return (
    <Stack gap="xs">
      <Group gap="sm" wrap="wrap" align="center">
        <Badge color={stateColor[p.state] ?? 'gray.7'}>{p.state}</Badge>
        <Text size="sm">
          On {where(p)}, started by {p.by} {when(p.since)};{' '}
          {p.nodes.length > 0 ? `reported by ${plural(p.nodes.length, 'node')} (${p.nodes.join(', ')})` : 'no node has reported it yet'}.
        </Text>
        {running && (
          <Text size="sm" fw={600}>
            {timeLeft(p.until, now)}
          </Text>
        )}
        {canEdit && running && (
          <Button size="xs" color="red.9" variant="outline" onClick={() => stop.mutate()} loading={stop.isPending}>
            Stop preview
          </Button>
        )}
      </Group>
      <ErrorAlert error={stop.error} title="The preview was not stopped" />
      {p.state === 'finished' && (
        <Alert color="gray" role="status" p="xs">
          <Text size="sm">
            The preview {endedLine(p.reason)} {p.endedAt ? when(p.endedAt) : ''}. These are the figures the control plane kept when it stopped.
          </Text>
        </Alert>
      )}
      {p.kept && (
        <Alert color="gray" role="status" p="xs">
          <Text size="sm">
            The preview {p.state === 'stopped' ? 'was stopped' : `ended ${when(p.until)}`}. These are the figures this page last saw ({when(p.kept)}): the nodes stop reporting a preview when it ends, and the control plane keeps none of its figures.
          </Text>
        </Alert>
      )}
      {!p.kept && p.state !== 'running' && p.state !== 'finished' && p.nodes.length === 0 && (
        <Alert color="gray" role="status" p="xs">
          <Text size="sm">The preview ended {when(p.until)}. The nodes no longer report its figures and the control plane keeps none: start it again to see them.</Text>
        </Alert>
      )}
      <div aria-live="polite" aria-relevant="text" style={{ overflowX: 'auto' }}>
        <PreviewTable rows={rows} />
      </div>
      <Text size="xs" c="gray.7">
        Rejected today: the live rule of that id, since each node started. If approved: the change&apos;s rule since the preview started, decided in shadow (nothing was rejected).
        {rows.some((r) => r.kind === 'limit' && !r.clients && r.preview.rejected > 0)
          ? ' Clients affected (≥) counts the distinct keys among the most rejected ones the nodes report (sampled, at most 5 a node), so it is a lower bound.'
          : ' Clients affected: the distinct keys the preview rejected, counted by each node (up to 10,000 a rule) and summed; ≈ when several nodes counted (a client reaching two nodes counts twice) or a node reached its cap.'}
        {p.approximate ? ' ≈ approximate: a cluster limit is judged by each node alone, its rate divided by the live nodes.' : ''}
      </Text>
    </Stack>
  );
}

/** PreviewSection is the change page's "Preview on live traffic" box. */
export function PreviewSection({ ns, id, limits, previewable, canEdit }: { ns: string; id: number; limits: Limit[] | undefined; previewable: boolean; canEdit: boolean }) {
  const q = usePreview(ns, id);
  const p = q.data;
  const running = p?.state === 'running' && !p.kept;
  if (!p && !previewable) return null;
  return (
    <Paper withBorder p="md" component="section" aria-label="Preview on live traffic">
      <Stack gap="sm">
        <Title order={2} size="h4">
          Preview on live traffic
        </Title>
        <Text size="sm" c="gray.7">
          The nodes decide every request again under this change&apos;s limits, in shadow after the live decision: nothing is rejected and nothing changes for clients.
        </Text>
        <ErrorAlert error={q.error} title="The preview could not be read" />
        {p && <PreviewFigures ns={ns} id={id} p={p} limits={limits} canEdit={canEdit} />}
        {canEdit && previewable && !running && !q.isPending && <PreviewForm ns={ns} id={id} restart={!!p} />}
        {!canEdit && !p && q.data === null && (
          <Text size="sm" c="gray.7">
            Not previewed. An editor can run it on live traffic before it is approved.
          </Text>
        )}
      </Stack>
    </Paper>
  );
}

/** PreviewSummary is the review box's account of the change's preview: a sentence per rule that would reject more than today. */
export function PreviewSummary({ ns, id, limits }: { ns: string; id: number; limits: Limit[] | undefined }) {
  const q = usePreview(ns, id);
  const p = q.data;
  if (q.isPending || q.error) return null;
  if (!p)
    return (
      <Text size="sm" c="gray.7">
        This change was not previewed on live traffic.
      </Text>
    );
  const rows = previewRows(p, limits);
  const worse = rows.filter((r) => r.worse);
  const seen = rows.reduce((n, r) => n + r.preview.requests, 0);
  const status = p.state === 'finished'
    ? `${endedLine(p.reason)}${p.endedAt ? ` ${when(p.endedAt)}` : ''}; figures kept then`
    : p.kept
    ? `${p.state === 'stopped' ? 'stopped' : 'ended'}; figures as last seen ${when(p.kept)}`
    : p.state === 'running'
      ? `running on ${plural(p.nodes.length, 'node')}`
      : `ended ${when(p.until)}`;
  return (
    <section aria-label="Preview summary">
      <Alert color={worse.length > 0 ? 'orange' : 'blue'} title={`Preview on live traffic (${status})`} role="note" styles={{ title: { color: 'var(--mantine-color-black)' } }}>
        {p.nodes.length === 0 && !p.kept ? (
          <Text size="sm">
            {p.state === 'running' ? 'No node has reported it yet.' : p.state === 'finished' ? 'No node reported it before it stopped.' : 'The nodes no longer report its figures.'}
          </Text>
        ) : worse.length === 0 ? (
          <Text size="sm">No previewed rule would reject a larger share than today ({plural(seen, 'request')} seen).</Text>
        ) : (
          <List size="sm" spacing={4}>
            {worse.map((r) => (
              <List.Item key={`${r.kind}/${r.rule}`}>{summaryLine(r)}</List.Item>
            ))}
          </List>
        )}
      </Alert>
    </section>
  );
}
