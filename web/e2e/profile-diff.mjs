// Profiling aid (not a test): CPU profile of the version diff page at 10,000
// rules through Chromium's DevTools protocol, summarised as self time per
// function, plus the page's resource timings. Run after make build:
// node e2e/profile-diff.mjs (RUNS=N rounds, 3 by default; TRACE=1 adds a
// DevTools trace summed by thread and event).
import { writeFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { startStack, Api } from './harness.mjs';
import { bigRuleSet, publish } from './bignamespace.mjs';

const runs = Number(process.env.RUNS ?? 3);

function summarize(profile) {
  const self = new Map();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const dt = profile.timeDeltas;
  const counts = new Map();
  profile.samples.forEach((id, i) => counts.set(id, (counts.get(id) ?? 0) + (dt[i] ?? 0)));
  for (const [id, us] of counts) {
    const n = byId.get(id);
    const f = n.callFrame;
    const k = `${f.functionName || '(anon)'} ${f.url.split('/').pop()}:${f.lineNumber}`;
    self.set(k, (self.get(k) ?? 0) + us);
  }
  return [...self].sort((a, b) => b[1] - a[1]).slice(0, 40).map(([k, us]) => `${(us / 1000).toFixed(1).padStart(8)} ms  ${k}`).join('\n');
}

async function main() {
  const stack = await startStack();
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  try {
    const { api, password } = stack;
    const approver = await new Api(stack.admin).login('approver', password.approver);
    await api.ok('POST', '/api/v1/namespaces', { name: 'big', description: '10,000 rules' });
    const v1 = await publish(api, approver, 'big', bigRuleSet('big', 10_000, 100), 'big v1');
    const v2 = await publish(api, approver, 'big', bigRuleSet('big', 10_000, 50), 'big v2');
    const ctx = await browser.newContext({ baseURL: stack.admin, viewport: { width: 1280, height: 800 } });
    ctx.setDefaultTimeout(60_000);
    const page = await ctx.newPage();
    await page.goto('/login');
    await page.getByLabel('Username').fill('admin');
    await page.getByRole('textbox', { name: 'Password' }).fill(password.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/namespaces');
    await page.addInitScript(() => {
      /* global addEventListener, MutationObserver, document -- runs in the page */
      addEventListener('load', () => performance.mark('load'));
      new MutationObserver((_, o) => { if (document.querySelector('.cm-changedLine')) { performance.mark('changedLine'); o.disconnect(); } }).observe(document, { subtree: true, childList: true });
    });
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
    for (let i = 0; i < runs; i++) {
      await page.goto('/namespaces/big/versions');
      await page.getByRole('table', { name: 'Versions' }).waitFor();
      await cdp.send('Profiler.start');
      const events = [];
      const onData = (e) => events.push(...e.value);
      cdp.on('Tracing.dataCollected', onData);
      if (process.env.TRACE) await cdp.send('Tracing.start', { categories: 'devtools.timeline,v8', transferMode: 'ReportEvents' });
      const t0 = Date.now();
      await page.goto(`/namespaces/big/versions/${v2}?diff=${v1}`);
      await page.getByRole('region', { name: `Version ${v1} and version ${v2}` }).locator('.cm-changedLine').first().waitFor();
      const ms = Date.now() - t0;
      const { profile } = await cdp.send('Profiler.stop');
      if (process.env.TRACE) {
        const done = new Promise((f) => cdp.once('Tracing.tracingComplete', f));
        await cdp.send('Tracing.end');
        await done;
        cdp.off('Tracing.dataCollected', onData);
        const main = new Map();
        const names = new Map(events.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => [`${e.pid}:${e.tid}`, e.args.name]));
        for (const e of events) if (e.ph === 'X' && e.dur) {
          const k = `${names.get(`${e.pid}:${e.tid}`) ?? e.tid} ${e.name}`;
          main.set(k, (main.get(k) ?? 0) + e.dur);
        }
        console.log([...main].sort((x, y) => y[1] - x[1]).slice(0, 40).map(([k, us]) => `${(us / 1000).toFixed(1).padStart(8)} ms  ${k}`).join('\n'));
      }
      writeFileSync(`/tmp/diff-${i}.cpuprofile`, JSON.stringify(profile));
      /* global location -- runs in the page */
      const res = await page.evaluate(() => [
        ...performance.getEntriesByType('navigation'),
        ...performance.getEntriesByType('resource'),
      ].map((e) => `${e.name.replace(location.origin, '').slice(0, 60).padEnd(60)} start ${e.startTime.toFixed(0).padStart(5)} end ${e.responseEnd.toFixed(0).padStart(5)} size ${e.encodedBodySize ?? ''}`).join('\n'));
      const marks = await page.evaluate(() => performance.getEntriesByType('mark').map((m) => `${m.name} ${m.startTime.toFixed(0)}`).join('\n'));
      console.log(`\n=== run ${i}: ${ms} ms; profile ${((profile.endTime - profile.startTime) / 1000).toFixed(0)} ms\n${res}\n${marks}\n${summarize(profile)}`);
    }
  } finally {
    await browser.close();
    await stack.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
