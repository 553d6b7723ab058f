// The change page's Publish: to every node, or as a canary on the nodes a
// selector matches (judged by the analysis or by hand), each confirmed
// with its scope: the version, the nodes and what the change does. To
// every node it may instead be scheduled ("Publish at"); a canary may not
// (the API refuses at with canary), so its row is hidden for a canary.
import { Button, Group, List, SegmentedControl, Stack, Text, TextInput } from '@mantine/core';
import { useState } from 'react';
import type { Change } from '../../api/client';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { ErrorAlert } from '../../components/ErrorAlert';
import { plural } from '../../components/format';
import { CanaryFields, canaryNodes, CanaryScope, useCanaryOptions } from '../canary/CanaryForm';
import { CanaryStatus } from '../canary/CanaryStatus';
import { usePublishCanary } from '../canary/hooks';
import { useNodes } from '../namespaces/hooks';
import { useCanary } from '../nodes/hooks';
import { type usePublish, useUnschedule } from './hooks';
import { publishScope } from './publishScope';
import type { SummaryLine } from './summary';

const shown = 8;

/**
 * PublishPanel publishes the approved change c as version newest+1, after a
 * confirmation naming its scope, or schedules its publication to every node;
 * defaultScope is the choice it opens with.
 */
export function PublishPanel({
  ns,
  c,
  lines,
  warnings,
  newest,
  publish,
  defaultScope = 'all',
}: {
  ns: string;
  c: Change;
  lines: SummaryLine[];
  warnings: number;
  newest: number;
  publish: ReturnType<typeof usePublish>;
  defaultScope?: 'all' | 'canary';
}) {
  const [scope, setScope] = useState<'all' | 'canary'>(defaultScope);
  const [publishAt, setPublishAt] = useState('');
  const unschedule = useUnschedule(ns, c.id!);
  const [confirming, setConfirming] = useState(false);
  const o = useCanaryOptions();
  const nodes = useNodes(ns).data?.items;
  const active = useCanary(ns, 5_000).data;
  const publishCanary = usePublishCanary(ns);
  const canary = scope === 'canary';
  const next = newest + 1;
  const s = publishScope(ns, next, nodes, canary ? { matching: canaryNodes(nodes, o.selector) } : undefined);
  const pending = canary ? publishCanary.isPending : publish.isPending && !publish.variables;
  const error = canary ? publishCanary.error : publish.error;
  const ok = !active && (!canary || o.ok);
  // A datetime-local value is local time; the API takes RFC 3339.
  const scheduleAt = publishAt ? new Date(publishAt) : undefined;
  const scheduleValid = scheduleAt !== undefined && !Number.isNaN(scheduleAt.getTime());
  const go = () => {
    const done = { onSuccess: () => setConfirming(false) };
    if (canary) publishCanary.mutate({ id: c.id!, selector: o.selector!, analysis: o.analysis }, done);
    else publish.mutate(undefined, done);
  };
  return (
    <Stack gap="sm" component="section" aria-label="Publish">
      {active && (
        <>
          <CanaryStatus ns={ns} />
          <Text size="sm" c="orange.9">
            A canary is running: promote or abort it on the canary page before publishing.
          </Text>
        </>
      )}
      <SegmentedControl
        value={scope}
        onChange={(v) => setScope(v as 'all' | 'canary')}
        data={[
          { value: 'all', label: 'To all nodes' },
          { value: 'canary', label: 'As a canary' },
        ]}
        aria-label="Publish to"
        style={{ alignSelf: 'flex-start' }}
      />
      {canary && <CanaryFields o={o} />}
      <Group>
        <Button onClick={() => setConfirming(true)} disabled={!ok} loading={pending}>
          {canary ? 'Publish as a canary' : 'Publish'}
        </Button>
      </Group>
      {(!canary || c.publishAt) && (
        <Group wrap="wrap" align="flex-end">
          {!canary && (
            <>
              <TextInput type="datetime-local" label="Publish at" description="Your local time; the control plane publishes it then" value={publishAt} onChange={(e) => setPublishAt(e.currentTarget.value)} />
              <Button variant="light" disabled={!scheduleValid} loading={publish.isPending && !!publish.variables} onClick={() => scheduleAt && publish.mutate(scheduleAt.toISOString())}>
                {c.publishAt ? 'Reschedule' : 'Schedule'}
              </Button>
            </>
          )}
          {c.publishAt && (
            <Button variant="default" onClick={() => unschedule.mutate()} loading={unschedule.isPending}>
              Cancel schedule
            </Button>
          )}
        </Group>
      )}
      <ErrorAlert error={unschedule.error} />
      <ConfirmDialog opened={confirming && ok} title={s.title} confirm={s.confirm} loading={pending} error={error} onClose={() => setConfirming(false)} onConfirm={go}>
        <Text size="sm" fw={600}>
          #{c.id} {c.title}: {plural(lines.length, 'rule change')}
          {warnings > 0 ? `, ${plural(warnings, 'risk flag')}` : ''}
        </Text>
        {lines.length > 0 && (
          <List size="sm" spacing={2} aria-label="What it publishes">
            {lines.slice(0, shown).map((l, i) => (
              <List.Item key={i}>
                <Text ff="monospace" size="sm">
                  {l.text}
                </Text>
              </List.Item>
            ))}
            {lines.length > shown && <List.Item>and {lines.length - shown} more (the change page lists them all)</List.Item>}
          </List>
        )}
        {canary ? <CanaryScope ns={ns} o={o} nodes={nodes} /> : <Text size="sm">{s.nodes}</Text>}
      </ConfirmDialog>
    </Stack>
  );
}
