import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

// The audit actions the console's filter offers: api/openapi.yaml's
// AuditAction enum (equal to sluice.AuditActions, a Go test checks), read at
// build time so that the console holds no second copy.
const spec = parse(readFileSync(new URL('../api/openapi.yaml', import.meta.url), 'utf8'));
const auditActions: unknown = spec?.components?.schemas?.AuditAction?.enum;
if (!Array.isArray(auditActions) || auditActions.length === 0) throw new Error('api/openapi.yaml has no components.schemas.AuditAction.enum');

// The console is served by sluice-admin from web/dist (embedded at build
// time); `npm run dev` proxies the API to a local sluice-admin on :8080.
export default defineConfig({
  plugins: [react()],
  define: { __AUDIT_ACTIONS__: JSON.stringify(auditActions) },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: {
    proxy: { '/api': 'http://127.0.0.1:8080' },
    fs: { allow: ['..'] },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
