// The page e2e/charthover.mjs drives: one TrafficChart (the traffic page's
// live chart, nothing else) of 5 minutes at 5 s steps, and globalThis.probe
// to play a stream update (tick: the newest step's time), a new line (lines:
// how many; the chart is rebuilt) and event markers (events).
import { MantineProvider } from '@mantine/core';
import '@mantine/core/styles.css';
import { useEffect, useState } from 'react';
import { flushSync } from 'react-dom';
import { createRoot } from 'react-dom/client';
import type { FleetEvent } from '../src/api/fleet';
import { TrafficChart } from '../src/features/traffic/TrafficChart';
import { timeGrid } from '../src/features/traffic/series';

const start = 1_800_000_000;

function App() {
  const [now, setNow] = useState(start);
  const [count, setCount] = useState(3);
  const [events, setEvents] = useState<FleetEvent[]>([]);
  useEffect(() => {
    Object.assign(globalThis, {
      probe: {
        tick: (t: number) => flushSync(() => setNow(t)),
        lines: (n: number) => flushSync(() => setCount(n)),
        events: (e: FleetEvent[]) => flushSync(() => setEvents(e)),
      },
    });
  }, []);
  const grid = timeGrid(now - 300, now, 5);
  const lines = Array.from({ length: count }, (_, i) => ({ label: `line${i}`, color: '#1c7ed6', values: grid.map((t) => ((t / 5) % 100) + i) }));
  return (
    <div style={{ width: 900, padding: 20 }}>
      <TrafficChart title="Probe" grid={grid} lines={lines} events={events} />
    </div>
  );
}

const el = document.createElement('div');
document.body.appendChild(el);
createRoot(el).render(
  <MantineProvider>
    <App />
  </MantineProvider>,
);
