import { Alert, Group, NativeSelect, Paper, SegmentedControl, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'react';
import { useParams, useSearchParams } from 'react-router';
import type { Limit } from '../../api/client';
import type { FleetEvent } from '../../api/fleet';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { StreamBadge } from '../../components/StreamBadge';
import { Loading, Page } from '../../components/Page';
import { useRecentEvents } from '../events/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useNodes } from '../namespaces/hooks';
import { useVersionDoc, useVersions } from '../versions/hooks';
import { measureColor, palette, type Line } from './chart';
import { maxNodeCharts, ranges, useNodesStats, useStats } from './hooks';
import { fleetSeries, markerEvents, nodeSeries, rates, stepSeconds, thresholdPerSecond, timeGrid, type Measure } from './series';
import { TrafficChart } from './TrafficChart';

/** useNow is the time in unix seconds, ticking every step, so the charts scroll even when no update comes. */
function useNow(step: number): number {
  const [now, setNow] = useState(() => Date.now() / 1000);
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now() / 1000), step * 1000);
    return () => clearInterval(t);
  }, [step]);
  return now;
}

const measures: Measure[] = ['allowed', 'rejected', 'shed'];

export function TrafficPage() {
  const ns = useParams().ns!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const [search, setSearch] = useSearchParams();
  const range = Number(search.get('range') ?? 300) || 300;
  const view = search.get('node') ?? '';
  const measure = (search.get('measure') as Measure | null) ?? 'rejected';
  const [ruleFilter, setRuleFilter] = useState('');
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

  const oneNode = view !== '' && view !== '*' ? view : undefined;
  const nodes = useNodes(ns);
  const liveNodes = (nodes.data?.items ?? []).filter((n) => n.live);
  const liveIds = liveNodes.map((n) => n.nodeId ?? '').sort();
  const each = useNodesStats(ns, range, liveIds, view === '*');
  const single = useStats(ns, range, oneNode, view !== '*');
  const stats = view === '*' ? each : single;
  const step = stepSeconds(stats.data?.step);
  const now = useNow(step);
  const since = now - range;
  const events = useRecentEvents(ns, since);
  const versions = useVersions(ns, 1);
  const doc = useVersionDoc(ns, versions.data?.items?.[0]?.number);

  const limits = useMemo(() => new Map<string, Limit>((doc.data?.limits ?? []).map((l) => [l.id, l])), [doc.data]);
  const grid = useMemo(() => timeGrid(since, now, step), [since, now, step]);
  const allEvents = useMemo(() => events.data?.items ?? [], [events.data]);

  const charts = useMemo(() => {
    const fleet = view === '*' ? [] : fleetSeries(stats.data);
    const rules = new Map<string, string>((view === '*' ? (stats.data?.series ?? []) : fleet).map((s) => [s.rule, s.kind]));
    for (const id of limits.keys()) if (!rules.has(id)) rules.set(id, 'limit');
    const out: { rule: string; kind: string; lines: Line[]; threshold?: number; events: FleetEvent[] }[] = [];
    for (const [rule, kind] of [...rules].sort((a, b) => a[0].localeCompare(b[0]))) {
      if (ruleFilter && !rule.includes(ruleFilter)) continue;
      const limit = limits.get(rule);
      const events = markerEvents(allEvents, rule, since, now, oneNode);
      if (view === '*') {
        const list = nodeSeries(stats.data, rule);
        out.push({
          rule,
          kind,
          lines: list.map((s, i) => ({ label: s.node!, color: palette[i % palette.length], values: rates(s.points, grid, step, measure) })),
          threshold: limit && limit.scope !== 'cluster' && measure === 'allowed' ? thresholdPerSecond(limit, 1) : undefined,
          events,
        });
        continue;
      }
      const s = fleet.find((x) => x.rule === rule);
      out.push({
        rule,
        kind,
        lines: measures.map((m) => ({ label: m, color: measureColor[m], values: rates(s?.points ?? [], grid, step, m) })),
        threshold: limit ? thresholdPerSecond(limit, oneNode ? 1 : liveNodes.length) : undefined,
        events,
      });
    }
    return out;
  }, [stats.data, limits, grid, step, view, measure, ruleFilter, oneNode, liveNodes.length, allEvents, since, now]);

  return (
    <Page
      title="Live traffic"
      crumbs={nsCrumbs(ns)}
      actions={
        <Stack gap="xs">
          <NamespaceNav ns={ns} />
          <Group gap="sm" wrap="wrap" align="flex-end">
            <div>
              <Text size="sm" fw={500} id="range-label">
                Range
              </Text>
              <SegmentedControl aria-labelledby="range-label" data={ranges.map((r) => ({ value: String(r.value), label: r.label }))} value={String(range)} onChange={(v) => set('range', v === '300' ? '' : v)} />
            </div>
            <NativeSelect
              label="Nodes"
              value={view}
              onChange={(e) => set('node', e.currentTarget.value)}
              data={[{ value: '', label: 'Fleet (all nodes)' }, { value: '*', label: 'Each node' }, ...(nodes.data?.items ?? []).map((n) => ({ value: n.nodeId ?? '', label: n.nodeId ?? '' }))]}
            />
            {view === '*' && <NativeSelect label="Measure" value={measure} onChange={(e) => set('measure', e.currentTarget.value)} data={measures} />}
            <TextInput label="Rule" placeholder="filter by rule id" value={ruleFilter} onChange={(e) => setRuleFilter(e.currentTarget.value)} />
            <StreamBadge state={stream} />
          </Group>
        </Stack>
      }
    >
      {stats.isPending && <Loading />}
      {view === '*' && liveIds.length > maxNodeCharts && (
        <Alert color="yellow">
          Showing the first {maxNodeCharts} of {liveIds.length} live nodes (by id); pick one node for the others.
        </Alert>
      )}
      <ErrorAlert error={stats.error} title="Stats unavailable" />
      {stats.data && charts.length === 0 && <Alert color="gray">No rule has reported traffic in this range.</Alert>}
      <SimpleGrid cols={{ base: 1, lg: 2 }}>
        {charts.map((c) => (
          <Paper key={c.rule} withBorder p="sm" component="section" aria-label={`${c.kind} ${c.rule}`}>
            <Title order={2} size="h5" mb={4}>
              {c.kind} {c.rule}
              <Text span size="xs" c="dimmed" ml="xs">
                {view === '*' ? `${measure} per second, each node` : oneNode ? `per second on ${oneNode}` : `per second, ${liveNodes.length} live node${liveNodes.length === 1 ? '' : 's'}`}
              </Text>
            </Title>
            {view === '*' && c.lines.length === 0 ? (
              <Text size="sm" c="dimmed">
                No node has reported this rule in this range.
              </Text>
            ) : (
              <TrafficChart title={`Traffic of ${c.rule}`} grid={grid} lines={c.lines} threshold={c.threshold} events={c.events} />
            )}
          </Paper>
        ))}
      </SimpleGrid>
    </Page>
  );
}
