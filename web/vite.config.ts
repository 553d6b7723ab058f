import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

// The console is served by sluice-admin from web/dist (embedded at build
// time); `npm run dev` proxies the API to a local sluice-admin on :8080.
export default defineConfig({
  plugins: [react()],
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
