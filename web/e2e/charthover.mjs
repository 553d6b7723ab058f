// The live chart's hover under a still pointer, in Chromium (no stack: the
// chart alone, bundled by Vite from e2e/charthover.tsx): the tooltip stays
// across stream updates, showing the step now under the pointer; across a
// rebuild of the chart (a line added); and while an event marker scrolls
// under the pointer and on past it. It goes when the pointer leaves.
// uPlot's own cursor does not survive the last two (a rebuilt chart starts
// without it; a marker takes the plot's mouseleave), so the chart places
// the hover itself after every draw (issue 30).
// Run: node e2e/charthover.mjs (CHROMIUM: the browser, /usr/bin/chromium).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { build } from 'vite';
import react from '@vitejs/plugin-react';

const root = join(import.meta.dirname, '..');
const out = await build({
  configFile: false,
  logLevel: 'silent',
  root,
  plugins: [react()],
  define: { 'process.env.NODE_ENV': '"production"' },
  build: { write: false, minify: true, lib: { entry: join(import.meta.dirname, 'charthover.tsx'), formats: ['iife'], name: 'chartHover', fileName: 'charthover' } },
});
const files = (Array.isArray(out) ? out : [out]).flatMap((o) => o.output);
const code = files.find((f) => f.type === 'chunk').code;
const css = files.filter((f) => f.type === 'asset' && f.fileName.endsWith('.css')).map((f) => String(f.source)).join('\n');

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 600 }, timezoneId: 'UTC' });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.setContent('<!doctype html><html><body></body></html>');
  await page.addStyleTag({ content: css });
  await page.addScriptTag({ content: code });
  const over = page.locator('.u-over');
  await over.waitFor();
  await page.waitForFunction(() => globalThis.probe);
  const box = await over.boundingBox();
  const tip = page.getByRole('tooltip', { name: /^Values at / });
  // hovered is the time (unix seconds) the tooltip shows, or null without one.
  const hovered = async () => {
    if ((await tip.count()) === 0) return null;
    const m = ((await tip.getAttribute('aria-label')) ?? '').match(/^Values at (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) UTC/);
    return m ? Date.parse(`${m[1]}T${m[2]}Z`) / 1000 : NaN;
  };
  // expectHover waits (a redraw is a frame or two away) for the tooltip to show the time want, or to be gone (null).
  const expectHover = async (want, what) => {
    let got;
    for (let i = 0; i < 40; i++) {
      got = await hovered();
      if (got === want) return;
      await page.waitForTimeout(25);
    }
    assert.equal(got, want, `${what}: the tooltip shows ${got === null ? 'nothing' : new Date(got * 1000).toISOString()}, want ${want === null ? 'nothing' : new Date(want * 1000).toISOString()}`);
  };

  // The grid is the 5 minutes to now at 5 s steps; the pointer stays at 3/4 of the plot's width, 75 s before now.
  let now = 1_800_000_000;
  const x = box.x + box.width * 0.75;
  const y = box.y + box.height / 2;
  await page.mouse.move(x, y);
  await expectHover(now - 75, 'the pointer over the plot');
  for (let i = 0; i < 3; i++) {
    now += 5;
    await page.evaluate((t) => globalThis.probe.tick(t), now);
    await expectHover(now - 75, `a stream update (${i + 1}) under a still pointer`);
  }
  await page.evaluate(() => globalThis.probe.lines(4));
  await expectHover(now - 75, 'the chart rebuilt with a new line under a still pointer');
  assert.match((await tip.textContent()) ?? '', /line3/, 'the tooltip lists the new line');

  // A marker one step to the right of the pointer: the next update brings it under the pointer, the ones after take it past.
  await page.evaluate((t) => globalThis.probe.events([{ id: 'e1', kind: 'publish', at: new Date(t * 1000).toISOString(), detail: { version: 9 } }]), now - 70);
  await page.getByRole('button', { name: /^Event: / }).waitFor();
  for (let i = 0; i < 3; i++) {
    now += 5;
    await page.evaluate((t) => globalThis.probe.tick(t), now);
    await expectHover(now - 75, i === 0 ? 'an event marker scrolled under a still pointer' : `the marker scrolled on past the pointer (${i})`);
  }

  await page.mouse.move(box.x - 15, y);
  await expectHover(null, 'the pointer left the chart');
  assert.deepEqual(errors, [], 'no page errors');
  console.log('chart hover: kept across stream updates, a rebuild and a passing marker; gone when the pointer leaves');
} finally {
  await browser.close();
}
