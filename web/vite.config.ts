import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// Built by `npm ci` (the `prepare` script) into web/dist, which the platform serves at `/`.
export default defineConfig({
  root: new URL('.', import.meta.url).pathname,
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The first-load budget is checked by test/web/bundle.test.ts and printed by `npm run bench:panel`.
    chunkSizeWarningLimit: 400,
    manifest: true,
    sourcemap: false,
  },
  server: {
    // `npm run dev:web` against a platform on :3000.
    proxy: { '/api': 'http://127.0.0.1:3000', '/mqtt': { target: 'ws://127.0.0.1:3000', ws: true } },
  },
});
