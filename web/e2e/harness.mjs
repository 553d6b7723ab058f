// The end-to-end stack: a fresh Postgres database, sluice-admin with an
// embedded etcd serving the built console, a demo upstream and one
// sluice-gateway following the namespace through etcd (more gateways, and
// the SDK's example service, on demand). Every port is picked
// free; every process is stopped at the end.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');
export const out = resolve(import.meta.dirname, '../test-results');
const bin = (name) => join(root, 'bin', name);

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, url, ms = 30_000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > end) throw new Error(`${what} did not become ready at ${url} within ${ms} ms; see ${out}/*.log`);
    await sleep(100);
  }
}

function psql(sql, db = 'postgres') {
  execFileSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-d', db, '-v', 'ON_ERROR_STOP=1', '-qc', sql], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' } });
}

/** A tiny API client for seeding, with a session cookie and its CSRF token. */
export class Api {
  constructor(base) {
    this.base = base;
    this.cookie = '';
    this.csrf = '';
  }
  async login(username, password) {
    const r = await fetch(`${this.base}/api/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username, password }) });
    if (!r.ok) throw new Error(`login ${username}: HTTP ${r.status} ${await r.text()}`);
    this.cookie = r.headers.get('set-cookie').split(';')[0];
    this.csrf = (await r.json()).csrfToken;
    return this;
  }
  async call(method, path, body, headers = {}) {
    const h = { Cookie: this.cookie, 'X-CSRF-Token': this.csrf, ...headers };
    let b;
    if (body !== undefined) {
      b = typeof body === 'string' ? body : JSON.stringify(body);
      h['Content-Type'] ??= 'application/json';
    }
    const r = await fetch(`${this.base}${path}`, { method, headers: h, body: b });
    const text = await r.text();
    const data = text && r.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
    return { status: r.status, headers: r.headers, data };
  }
  async ok(method, path, body, headers) {
    const r = await this.call(method, path, body, headers);
    if (r.status >= 300) throw new Error(`${method} ${path}: HTTP ${r.status} ${JSON.stringify(r.data)}`);
    return r;
  }
}

/**
 * gatewayFlags are the flags of every gateway the harness starts; a flag
 * the gateway's build does not know yet is left out (the list is read from
 * its --help), so adding one is one line.
 */
const optionalGatewayFlags = [['--report-interval', '1s']];

export async function startStack() {
  mkdirSync(out, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'sluice-e2e-'));
  const db = `sluice_e2e_${process.pid}`;
  const [adminPort, etcdPort, peerPort, gwPort, gwAdminPort, upPort] = await Promise.all(Array.from({ length: 6 }, freePort));
  const procs = [];
  const start = (name, cmd, args, env = {}) => {
    const log = openSync(join(out, `${name}.log`), 'w');
    const p = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', log, log] });
    p.on('exit', (code, sig) => {
      if (!stopping) console.error(`${name} exited (${code ?? sig}); see ${out}/${name}.log`);
    });
    procs.push(p);
    return p;
  };
  let stopping = false;
  const stop = async () => {
    stopping = true;
    for (const p of procs.reverse()) if (p.exitCode === null) p.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode === null ? new Promise((r) => p.once('exit', r)) : null)));
    try {
      psql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    } catch {
      // best effort
    }
    rmSync(work, { recursive: true, force: true });
  };

  const password = {
    admin: 'admin-e2e-password-1',
    editor: 'editor-e2e-password-1',
    editor2: 'editor2-e2e-password-1',
    approver: 'approver-e2e-password-1',
    viewer: 'viewer-e2e-password-1',
  };
  try {
    psql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    psql(`CREATE DATABASE ${db}`);
    const dbURL = `postgres://postgres@127.0.0.1:5432/${db}?sslmode=disable`;
    const admin = `http://127.0.0.1:${adminPort}`;
    // The control plane signs what it publishes and the gateway trusts only
    // that key, as in production; the audit chain gets its own HMAC key.
    const signingKey = join(work, 'signing.key');
    const trustKey = join(work, 'signing.pub');
    execFileSync(bin('sluice-admin'), ['keygen', '--private', signingKey, '--public', trustKey], { stdio: ['ignore', 'pipe', 'pipe'] });
    const auditKey = randomBytes(32).toString('hex');
    start('sluice-admin', bin('sluice-admin'), [
      '--database-url', dbURL,
      '--embedded-etcd', join(work, 'etcd'),
      '--etcd-endpoints', `127.0.0.1:${etcdPort}`,
      '--embedded-etcd-peer', `127.0.0.1:${peerPort}`,
      '--listen', `127.0.0.1:${adminPort}`,
      '--publish-poll-interval', '200ms',
      '--signing-key', signingKey,
    ], { SLUICE_BOOTSTRAP_ADMIN_PASSWORD: password.admin, SLUICE_AUDIT_KEY: auditKey });
    await waitFor('sluice-admin', `${admin}/readyz`);

    const api = await new Api(admin).login('admin', password.admin);
    for (const [u, role] of [['editor', 'editor'], ['editor2', 'editor'], ['approver', 'approver'], ['viewer', 'viewer']]) {
      await api.ok('POST', '/api/v1/users', { username: u, password: password[u], role });
    }
    await api.ok('POST', '/api/v1/namespaces', { name: 'shop', description: 'end-to-end test <b>shop</b>' });
    const upstream = `http://127.0.0.1:${upPort}`;
    const rules = {
      namespace: 'shop',
      routes: [
        { id: 'orders', match: { pathPrefix: '/orders' }, upstream: { targets: [{ url: upstream }], timeout: '5s' } },
        { id: 'catalog', match: { pathPrefix: '/' }, upstream: { targets: [{ url: upstream }] } },
      ],
      limits: [{ id: 'orders-limit', routes: ['orders'], key: ['global'], algorithm: 'fixed_window', rate: 100, period: '1m' }],
    };
    const etag = (await api.ok('GET', '/api/v1/namespaces/shop/draft')).headers.get('etag');
    await api.ok('PUT', '/api/v1/namespaces/shop/draft', rules, { 'If-Match': etag });
    const change = (await api.ok('POST', '/api/v1/namespaces/shop/changes', { title: 'first rules', description: 'seeded' })).data;
    const approver = await new Api(admin).login('approver', password.approver);
    await approver.ok('POST', `/api/v1/namespaces/shop/changes/${change.id}/approve`, { comment: 'ok' });
    await approver.ok('POST', `/api/v1/namespaces/shop/changes/${change.id}/publish`, {});

    start('demo-upstream', bin('demo-upstream'), ['--listen', `127.0.0.1:${upPort}`, '--name', 'e2e']);
    const help = (() => {
      try {
        return execFileSync(bin('sluice-gateway'), ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (e) {
        return `${e.stdout ?? ''}${e.stderr ?? ''}`;
      }
    })();
    const extra = optionalGatewayFlags.filter(([f]) => help.includes(f.replace(/^--/, '-'))).flat();
    // startGateway starts one more gateway following the namespace (its own
    // ports and state directory), stopped with the stack; it resolves once
    // the gateway is ready.
    const startGateway = async (nodeID, labels, ports) => {
      const [listen, adminAt] = ports ?? (await Promise.all([freePort(), freePort()]));
      start(nodeID, bin('sluice-gateway'), [
        '--etcd', `127.0.0.1:${etcdPort}`,
        '--namespace', 'shop',
        '--node-id', nodeID,
        '--labels', labels,
        '--state-dir', join(work, `${nodeID}-state`),
        '--listen', `127.0.0.1:${listen}`,
        '--admin', `127.0.0.1:${adminAt}`,
        '--trust-keys', trustKey,
        ...extra,
      ]);
      const gwAdmin = `http://127.0.0.1:${adminAt}`;
      await waitFor(nodeID, `${gwAdmin}/readyz`);
      return { gateway: `http://127.0.0.1:${listen}`, gwAdmin };
    };
    // startService starts the in-service SDK's example orders service
    // (bin/orders-example, a node of kind sdk) following namespace ns
    // through the stack's etcd, trusting the control plane's key, stopped
    // with the stack. It resolves once the process is started: it
    // registers as soon as it reaches etcd (poll the nodes API for it).
    const startService = async (nodeID, ns) => {
      const [listen, grpcListen] = await Promise.all([freePort(), freePort()]);
      start(nodeID, bin('orders-example'), [
        '--etcd', `127.0.0.1:${etcdPort}`,
        '--namespace', ns,
        '--node-id', nodeID,
        '--trust-keys', trustKey,
        '--state-dir', join(work, `${nodeID}-state`),
        '--listen', `127.0.0.1:${listen}`,
        '--grpc-listen', `127.0.0.1:${grpcListen}`,
        '--report-interval', '1s',
      ]);
      return { http: `http://127.0.0.1:${listen}`, grpc: `127.0.0.1:${grpcListen}` };
    };
    const { gwAdmin } = await startGateway('gw-e2e', 'pool=canary', [gwPort, gwAdminPort]);
    return { admin, gateway: `http://127.0.0.1:${gwPort}`, gwAdmin, startGateway, startService, password, api, db, sql: (q) => psql(q, db), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** gatewayVersion is the version the gateway runs, from its /status. */
export async function gatewayVersion(gwAdmin) {
  const s = await (await fetch(`${gwAdmin}/status`)).json();
  return s.version ?? s.applied?.version ?? s.ruleset?.version ?? 0;
}

export { sleep };
