import { Alert, Group, NativeSelect, Paper, SegmentedControl, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'react';
import { useParams, useSearchParams } from 'react-router';
import type { Limit } from '../../api/client';
import type { FleetEvent } from '../../api/fleet';
import { useStream } from '../../api/stream';
import { ErrorAlert } from '../../components/ErrorAlert';
import { absolute } from '../../components/format';
import { StreamBadge } from '../../components/StreamBadge';
import { Loading, Page } from '../../components/Page';
import { useRecentEvents } from '../events/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useNodes } from '../namespaces/hooks';
import { ms } from '../nodes/NodesPage';
import { useVersionDoc, useVersions } from '../versions/hooks';
import { measureColor, palette, type Line } from './chart';
import { maxNodeCharts, ranges, retainedSeconds, useNodesStats, useStats, type StatsWindow } from './hooks';
import { fleetSeries, markerEvents, nodeSeries, rates, stepSeconds, threshold, timeGrid, variantSeries, variantShares, variantTotals, type Measure } from './series';
import { fmtRate, TrafficChart } from './TrafficChart';

/** useNow is the time in unix seconds, ticking every step seconds. */
function useNow(step: number): number {
  const [now, setNow] = useState(() => Date.now() / 1000);
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now() / 1000), step * 1000);
    return () => clearInterval(t);
  }, [step]);
  return now;
}

const measures: Measure[] = ['allowed', 'rejected', 'shed'];

/** localInput writes unix seconds as a datetime-local input's value (local time, to the second). */
function localInput(t: number): string {
  const d = new Date(Math.round(t) * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** fromInput reads a datetime-local input's value as unix seconds; NaN when empty or unreadable. */
function fromInput(v: string): number {
  return v ? new Date(v).getTime() / 1000 : NaN;
}

/**
 * customRange checks a custom range (unix seconds) against the hour the
 * control plane keeps: it returns the range, clipped to it, or why it
 * cannot be shown.
 */
function customRange(from: number, to: number, now: number): { from: number; to: number } | { error: string } {
  if (!Number.isFinite(from) || !Number.isFinite(to)) return { error: 'Pick a start and an end.' };
  if (to <= from) return { error: 'The end must be after the start.' };
  if (to <= now - retainedSeconds) return { error: 'The control plane keeps only the last hour of stats: pick a range within it.' };
  return { from: Math.max(from, now - retainedSeconds), to: Math.min(to, now) };
}

/** shortPeriod drops a Go duration's zero tail: "1h0m0s" is "1h", "1m0s" "1m". */
function shortPeriod(p: string): string {
  return p.replace(/([hm])0s$/, '$1').replace(/h0m$/, 'h');
}

/** fmtP99 writes a p99 in seconds as the nodes' pages do (ms); "–" without requests. */
function fmtP99(v: number | undefined): string {
  return v === undefined ? '–' : ms(v);
}

/** fmtShare writes a share (0-1) as a percentage. */
function fmtShare(v: number | undefined): string {
  return v === undefined ? '–' : `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`;
}

export function TrafficPage() {
  const ns = useParams().ns!;
  const qc = useQueryClient();
  const stream = useStream(qc, ns);
  const [search, setSearch] = useSearchParams();
  const custom = search.get('range') === 'custom';
  const range = custom ? 0 : Number(search.get('range') ?? 300) || 300;
  const tab = search.get('tab') === 'variants' ? 'variants' : 'rules';
  const view = search.get('node') ?? '';
  const measure = (search.get('measure') as Measure | null) ?? 'rejected';
  const [ruleFilter, setRuleFilter] = useState('');
  const setMany = (kv: Record<string, string>) =>
    setSearch(
      (p) => {
        const n = new URLSearchParams(p);
        for (const [k, v] of Object.entries(kv)) {
          if (v === '') n.delete(k);
          else n.set(k, v);
        }
        return n;
      },
      { replace: true },
    );
  const set = (k: string, v: string) => setMany({ [k]: v });
  // The clock ticks every 5 s (the stats' resolution), so the charts scroll even when no update comes.
  const ticking = useNow(5);
  // A custom range: from and to in unix seconds, clipped to the hour kept. Its query starts at the from asked
  // for (the control plane clips it too), so the query stays the same as the clock ticks.
  const win = custom ? customRange(Number(search.get('from')), Number(search.get('to')), ticking) : undefined;
  const fixed = win && 'from' in win ? win : undefined;
  const statsWindow: StatsWindow = fixed ? `from:${Math.floor(Number(search.get('from')))}` : range || 300;

  const oneNode = view !== '' && view !== '*' ? view : undefined;
  const nodes = useNodes(ns);
  const liveNodes = (nodes.data?.items ?? []).filter((n) => n.live);
  const liveIds = liveNodes.map((n) => n.nodeId ?? '').sort();
  const each = useNodesStats(ns, statsWindow, liveIds, view === '*' && (!custom || !!fixed));
  const single = useStats(ns, statsWindow, oneNode, view !== '*' && (!custom || !!fixed));
  const stats = view === '*' ? each : single;
  const step = stepSeconds(stats.data?.step);
  const now = fixed ? fixed.to : ticking;
  const since = fixed ? fixed.from : now - (range || 300);
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
    const out: { rule: string; kind: string; lines: Line[]; threshold?: number; thresholdNote?: string; events: FleetEvent[] }[] = [];
    for (const [rule, kind] of [...rules].sort((a, b) => a[0].localeCompare(b[0]))) {
      if (ruleFilter && !rule.includes(ruleFilter)) continue;
      const limit = limits.get(rule);
      const events = markerEvents(allEvents, rule, since, now, oneNode);
      if (view === '*') {
        const list = nodeSeries(stats.data, rule);
        // Each node's line against one node's threshold: a line for allowed only (what the limit caps).
        const th = limit && measure === 'allowed' ? threshold(limit, 'node') : undefined;
        out.push({
          rule,
          kind,
          lines: list.map((s, i) => ({ label: s.node!, color: palette[i % palette.length], values: rates(s.points, grid, step, measure) })),
          threshold: th?.value,
          thresholdNote: th?.note,
          events,
        });
        continue;
      }
      const s = fleet.find((x) => x.rule === rule);
      const th = limit ? threshold(limit, oneNode ? 'node' : { nodes: liveNodes.length }) : undefined;
      out.push({
        rule,
        kind,
        lines: measures.map((m) => ({ label: m, color: measureColor[m], values: rates(s?.points ?? [], grid, step, m) })),
        threshold: th?.value,
        thresholdNote: th?.note,
        events,
      });
    }
    return out;
  }, [stats.data, limits, grid, step, view, measure, ruleFilter, oneNode, liveNodes.length, allEvents, since, now]);

  // The variants view: every limit of the running version with variants, its variants side by side.
  const variantViews = useMemo(() => {
    if (tab !== 'variants') return [];
    return [...limits.values()]
      .filter((l) => (l.variants?.length ?? 0) > 0 && (!ruleFilter || l.id.includes(ruleFilter)))
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((l) => {
        const series = new Map(variantSeries(stats.data, l.id).map((s) => [s.variant, s.points]));
        return {
          limit: l,
          variants: variantShares(l).map((v) => {
            const points = series.get(v.id) ?? [];
            return {
              ...v,
              totals: variantTotals(points, since, now),
              lines: (['allowed', 'rejected'] as const).map((m) => ({ label: m, color: measureColor[m], values: rates(points, grid, step, m) })),
            };
          }),
        };
      });
  }, [tab, limits, ruleFilter, stats.data, since, now, grid, step]);

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
              <SegmentedControl
                aria-labelledby="range-label"
                data={[...ranges.map((r) => ({ value: String(r.value), label: r.label })), { value: 'custom', label: 'Custom' }]}
                value={custom ? 'custom' : String(range)}
                onChange={(v) => {
                  if (v !== 'custom') return setMany({ range: v === '300' ? '' : v, from: '', to: '' });
                  // Start from the last 15 minutes; the inputs below change it.
                  const t = Math.floor(Date.now() / 1000);
                  setMany({ range: 'custom', from: String(t - 900), to: String(t) });
                }}
              />
            </div>
            {custom && (
              <>
                <TextInput
                  type="datetime-local"
                  step={1}
                  label="From"
                  value={Number.isFinite(Number(search.get('from'))) ? localInput(Number(search.get('from'))) : ''}
                  onChange={(e) => set('from', String(Math.floor(fromInput(e.currentTarget.value))))}
                />
                <TextInput
                  type="datetime-local"
                  step={1}
                  label="To"
                  value={Number.isFinite(Number(search.get('to'))) ? localInput(Number(search.get('to'))) : ''}
                  onChange={(e) => set('to', String(Math.floor(fromInput(e.currentTarget.value))))}
                />
              </>
            )}
            <div>
              <Text size="sm" fw={500} id="view-label">
                View
              </Text>
              <SegmentedControl
                aria-labelledby="view-label"
                data={[
                  { value: 'rules', label: 'Rules' },
                  { value: 'variants', label: 'Variants' },
                ]}
                value={tab}
                onChange={(v) => set('tab', v === 'rules' ? '' : v)}
              />
            </div>
            <NativeSelect
              label="Nodes"
              value={view}
              onChange={(e) => set('node', e.currentTarget.value)}
              data={[{ value: '', label: 'Fleet (all nodes)' }, { value: '*', label: 'Each node' }, ...(nodes.data?.items ?? []).map((n) => ({ value: n.nodeId ?? '', label: n.nodeId ?? '' }))]}
            />
            {view === '*' && tab === 'rules' && <NativeSelect label="Measure" value={measure} onChange={(e) => set('measure', e.currentTarget.value)} data={measures} />}
            <TextInput label="Rule" placeholder="filter by rule id" value={ruleFilter} onChange={(e) => setRuleFilter(e.currentTarget.value)} />
            <StreamBadge state={stream} />
          </Group>
        </Stack>
      }
    >
      {win && 'error' in win && (
        <Alert color="red" title="Custom range">
          {win.error}
        </Alert>
      )}
      {fixed && (
        <Text size="sm" c="dimmed">
          Custom range: {absolute(new Date(fixed.from * 1000))} to {absolute(new Date(fixed.to * 1000))} (the control plane keeps the last hour).
        </Text>
      )}
      {stats.isPending && (!custom || fixed) && <Loading />}
      {view === '*' && liveIds.length > maxNodeCharts && (
        <Alert color="yellow">
          Showing the first {maxNodeCharts} of {liveIds.length} live nodes (by id); pick one node for the others.
        </Alert>
      )}
      <ErrorAlert error={stats.error} title="Stats unavailable" />
      {tab === 'variants' && (
        <>
          {variantViews.length === 0 && <Alert color="gray">No limit of the running version has variants{ruleFilter ? ' matching the filter' : ''}.</Alert>}
          {variantViews.map(({ limit, variants }) => (
            <Paper key={limit.id} withBorder p="sm" component="section" aria-label={`Variants of ${limit.id}`}>
              <Title order={2} size="h5" mb={4}>
                limit {limit.id}
                <Text span size="xs" c="dimmed" ml="xs">
                  {variants.length} variants side by side, {oneNode ? `on ${oneNode}` : 'fleet-wide'}
                </Text>
              </Title>
              <Table fz="sm" aria-label={`Variants of ${limit.id} compared`} style={{ fontVariantNumeric: 'tabular-nums' }} mb="sm">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Variant</Table.Th>
                    <Table.Th ta="right">Clients</Table.Th>
                    <Table.Th>Rate</Table.Th>
                    <Table.Th ta="right">Allowed</Table.Th>
                    <Table.Th ta="right">Rejected</Table.Th>
                    <Table.Th ta="right">Rejected share</Table.Th>
                    <Table.Th ta="right">p99 last step</Table.Th>
                    <Table.Th ta="right">p99 worst step</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {variants.map((v) => (
                    <Table.Tr key={v.id}>
                      <Table.Th scope="row">{v.id}</Table.Th>
                      <Table.Td ta="right">{v.weight}%</Table.Td>
                      <Table.Td>{v.rate !== undefined ? `${v.rate} per ${shortPeriod(v.period ?? '1s')}` : v.algorithm}</Table.Td>
                      <Table.Td ta="right" aria-label={`${v.id} allowed`}>
                        {fmtRate(v.totals.allowedPerSecond)}
                      </Table.Td>
                      <Table.Td ta="right" aria-label={`${v.id} rejected`}>
                        {fmtRate(v.totals.rejectedPerSecond)}
                      </Table.Td>
                      <Table.Td ta="right" aria-label={`${v.id} rejected share`}>
                        {fmtShare(v.totals.rejectedShare)}
                      </Table.Td>
                      <Table.Td ta="right" aria-label={`${v.id} p99`}>
                        {fmtP99(v.totals.p99Last)}
                      </Table.Td>
                      <Table.Td ta="right" aria-label={`${v.id} worst p99`}>
                        {fmtP99(v.totals.p99Max)}
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
              <Text size="xs" c="dimmed" mb="xs">
                Allowed and rejected are per-second means over the range. p99 is the 99th percentile of the durations of the requests each variant let
                through (allowed or shadow-rejected, and admitted by the route's other limits; not its 429s), per {step} s step: the newest step's and the range's worst.
              </Text>
              <SimpleGrid cols={{ base: 1, md: Math.min(variants.length, 3) }}>
                {variants.map((v) => (
                  <div key={v.id}>
                    <Text size="sm" fw={500}>
                      {v.id} ({v.weight}% of clients)
                    </Text>
                    <TrafficChart title={`Traffic of ${limit.id} variant ${v.id}`} grid={grid} lines={v.lines} events={[]} height={140} />
                  </div>
                ))}
              </SimpleGrid>
            </Paper>
          ))}
        </>
      )}
      {tab === 'rules' && stats.data && charts.length === 0 && <Alert color="gray">No rule has reported traffic in this range.</Alert>}
      <SimpleGrid cols={{ base: 1, lg: 2 }}>
        {(tab === 'rules' ? charts : []).map((c) => (
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
              <TrafficChart title={`Traffic of ${c.rule}`} grid={grid} lines={c.lines} threshold={c.threshold} thresholdNote={c.thresholdNote} events={c.events} />
            )}
          </Paper>
        ))}
      </SimpleGrid>
    </Page>
  );
}
