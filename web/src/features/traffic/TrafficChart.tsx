import { Box, Group, Paper, Table, Text, Tooltip } from '@mantine/core';
import { useElementSize } from '@mantine/hooks';
import { useEffect, useRef, useState } from 'react';
import type uPlot from 'uplot';
import type { FleetEvent } from '../../api/fleet';
import { absolute } from '../../components/format';
import { alignedData, LiveChart, type Hover, type Line } from './chart';
import { eventLabel, legendStats, placeMarkers, type Marker } from './series';

/** fmtRate writes a per-second rate with its unit; "no data" when there is none. */
export function fmtRate(v: number | null | undefined): string {
  if (v === undefined || v === null) return 'no data';
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)}/s`;
}

function sameMarkers(a: Marker[], b: Marker[]): boolean {
  return a.length === b.length && a.every((m, i) => Math.abs(m.x - b[i].x) < 0.5 && m.events.length === b[i].events.length && m.events[0].id === b[i].events[0].id);
}

/**
 * TrafficChart is one live canvas chart: per-second lines on a time grid,
 * the threshold dashed (or a note saying why there is none), and the events
 * as markers a keyboard can reach. Hovering shows the step's time and every
 * line's value; the legend under it gives each line's min, mean, max and
 * latest value over the range, so the numbers are readable without the
 * canvas.
 */
export function TrafficChart({
  title,
  grid,
  lines,
  threshold,
  thresholdNote,
  events,
  height = 180,
}: {
  title: string;
  grid: number[];
  lines: Line[];
  threshold?: number;
  thresholdNote?: string;
  events: FleetEvent[];
  height?: number;
}) {
  const { ref: box, width } = useElementSize();
  const el = useRef<HTMLDivElement>(null);
  const chart = useRef<LiveChart | null>(null);
  const [markers, setMarkers] = useState<{ left: number; top: number; height: number; list: Marker[] }>({ left: 0, top: 0, height: 0, list: [] });
  const eventsRef = useRef(events);
  // The step under the pointer (left and top over the chart's box); the chart places it after every draw.
  const [hover, setHover] = useState<Hover | null>(null);
  const pointer = useRef<{ x: number; y: number } | null>(null);
  const shape = lines.map((l) => `${l.label}\u0000${l.color}`).join('\u0001');

  useEffect(() => {
    eventsRef.current = events;
    chart.current?.u.redraw(false, false);
  }, [events]);

  // One uPlot per set of lines; data changes go to setData, not a new chart.
  useEffect(() => {
    if (!el.current || width <= 0) return;
    const onDraw = (u: uPlot) => {
      const w = u.bbox.width / devicePixelRatio;
      const list = placeMarkers(eventsRef.current, (t) => u.valToPos(t, 'x'), w);
      setMarkers((prev) => {
        const next = { left: u.over.offsetLeft, top: u.over.offsetTop, height: u.bbox.height / devicePixelRatio, list };
        return prev.left === next.left && prev.top === next.top && prev.height === next.height && sameMarkers(prev.list, list) ? prev : next;
      });
    };
    const onHover = (u: uPlot, h: Hover | null) =>
      setHover((prev) => {
        const next = h && { t: h.t, left: u.over.offsetLeft + h.left, top: u.over.offsetTop + h.top };
        return prev === next || (prev && next && prev.t === next.t && prev.left === next.left && prev.top === next.top) ? prev : next;
      });
    const c = new LiveChart(el.current, { width, height, lines: lines.map(({ label, color }) => ({ label, color })), threshold, onDraw, onHover }, alignedData(grid, lines.map((l) => l.values)));
    chart.current = c;
    // A chart rebuilt under a still pointer (its lines changed) hovers where the pointer is.
    c.pointer(pointer.current);
    return () => {
      c.destroy();
      chart.current = null;
    };
    // The chart is rebuilt only when its lines change or it first gets a width; data, size and threshold update it below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, width > 0]);

  useEffect(() => {
    chart.current?.update(alignedData(grid, lines.map((l) => l.values)));
  }, [grid, lines]);
  useEffect(() => chart.current?.setThreshold(threshold), [threshold]);
  useEffect(() => chart.current?.resize(width, height), [width, height]);
  // The hovered step's index in the grid rendered now; none once it has scrolled out of the range.
  const at = hover ? grid.indexOf(hover.t) : -1;

  return (
    <Box component="figure" m={0} aria-label={title}>
      <Box
        ref={box}
        pos="relative"
        onPointerMove={(e) => {
          pointer.current = { x: e.clientX, y: e.clientY };
          chart.current?.pointer(pointer.current);
        }}
        onPointerLeave={() => {
          pointer.current = null;
          chart.current?.pointer(null);
        }}
      >
        <div ref={el} role="img" aria-label={`${title}: per-second rates over time${threshold !== undefined ? `, threshold ${fmtRate(threshold)}` : ''}`} />
        {hover && at >= 0 && (
          <Paper
            role="tooltip"
            aria-label={`Values at ${absolute(new Date(hover.t * 1000), undefined, true)}`}
            shadow="sm"
            withBorder
            p={6}
            style={{ position: 'absolute', left: hover.left + 12 > width - 190 ? hover.left - 190 : hover.left + 12, top: Math.max(0, hover.top - 10), pointerEvents: 'none', zIndex: 3, minWidth: 160 }}
          >
            <Text size="xs" fw={600}>
              {absolute(new Date(hover.t * 1000), undefined, true)}
            </Text>
            {lines.map((l) => (
              <Group key={l.label} gap={4} wrap="nowrap" justify="space-between">
                <Text size="xs">
                  <span aria-hidden style={{ display: 'inline-block', width: 10, height: 3, background: l.color, marginRight: 4, verticalAlign: 'middle' }} />
                  {l.label}
                </Text>
                <Text size="xs" ff="monospace">
                  {fmtRate(l.values[at])}
                </Text>
              </Group>
            ))}
            {threshold !== undefined && (
              <Text size="xs" c="red.8">
                threshold {fmtRate(threshold)}
              </Text>
            )}
          </Paper>
        )}
        {markers.list.map((m) => {
          const label = m.events.map((e) => `${eventLabel(e)} at ${absolute(e.at)}`).join('; ');
          return (
            <Tooltip key={`${m.at}-${m.events[0].id}`} label={label} multiline maw={320} withArrow>
              <button
                type="button"
                aria-label={`Event: ${label}`}
                style={{ position: 'absolute', left: markers.left + m.x - 4, top: markers.top, height: markers.height, width: 8, padding: 0, border: 0, background: 'transparent', cursor: 'help' }}
              >
                <span style={{ display: 'block', margin: '0 auto', width: 2, height: '100%', background: m.events.some((e) => e.kind === 'publish' || e.kind === 'rollback' || e.kind === 'canary') ? '#4263eb' : '#e8590c', opacity: 0.8 }} />
              </button>
            </Tooltip>
          );
        })}
      </Box>
      <Box component="figcaption" mt={4}>
        <Table fz="xs" verticalSpacing={1} horizontalSpacing={6} aria-label={`Legend of ${title}`} style={{ fontVariantNumeric: 'tabular-nums' }}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Series</Table.Th>
              <Table.Th ta="right">Min</Table.Th>
              <Table.Th ta="right">Avg</Table.Th>
              <Table.Th ta="right">Max</Table.Th>
              <Table.Th ta="right">Last</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {lines.map((l) => {
              const st = legendStats(l.values);
              return (
                <Table.Tr key={l.label}>
                  <Table.Th scope="row" fw={400}>
                    <span aria-hidden style={{ display: 'inline-block', width: 10, height: 3, background: l.color, marginRight: 4, verticalAlign: 'middle' }} />
                    {l.label}
                  </Table.Th>
                  <Table.Td ta="right" aria-label={`${l.label} min`}>
                    {fmtRate(st?.min)}
                  </Table.Td>
                  <Table.Td ta="right" aria-label={`${l.label} avg`}>
                    {fmtRate(st?.avg)}
                  </Table.Td>
                  <Table.Td ta="right" aria-label={`${l.label} max`}>
                    {fmtRate(st?.max)}
                  </Table.Td>
                  <Table.Td ta="right" aria-label={`${l.label} now`}>
                    {fmtRate(st?.last)}
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
        <Group gap="md" mt={2}>
          {threshold !== undefined && (
            <Text size="xs" c="red.8" aria-label="Threshold">
              threshold: {fmtRate(threshold)}
            </Text>
          )}
          {threshold === undefined && thresholdNote && (
            <Text size="xs" c="dimmed" aria-label="No threshold line">
              {thresholdNote}
            </Text>
          )}
        </Group>
      </Box>
    </Box>
  );
}
