import { existsSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import express, { Router } from 'express';
import { NotFoundError, UnavailableError } from '../domain/shared/errors.js';

/** Where `npm run build:web` (run by `npm ci` through `prepare`) puts the control panel. */
export const PANEL_DIR = new URL('../web/dist', import.meta.url).pathname;

/**
 * The panel's own policy: scripts only from the platform, connections only to
 * the platform (REST, MQTT over WebSocket), forms sent only to the platform,
 * map tiles from any http(s) address a user configures.
 */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Leaflet and the grid position elements with style attributes.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob: http: https:",
  // 'self' covers the page's own origin over ws: and wss: too (CSP Level 3), so MQTT at /mqtt needs nothing more.
  "connect-src 'self'",
  // MQTT.js keeps its keep-alive timers in a worker made from a blob, so background tabs do not throttle them.
  "worker-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

/**
 * Serves the control panel at `/`: the built files, and `index.html` for any
 * other page path (the panel routes in the browser). `/api` and `/mqtt` are
 * never answered here. Hashed assets are cached for a year; `index.html` is
 * revalidated, so a new build is picked up on the next load.
 */
export function panelRoutes(dir: string = PANEL_DIR): Router {
  const router = Router();
  const index = join(dir, 'index.html');
  const isPanelPath = (path: string) => !/^\/(api|mqtt)(\/|$)/.test(path);
  const assets = express.static(dir, {
    index: false,
    fallthrough: true,
    setHeaders(res, path) {
      res.setHeader('Cache-Control', path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  // Hashed assets never change, so each is gzipped once, on its first request, and kept. Only files that exist are
  // kept: anyone may ask for any path below /assets/, and remembering each would let them fill the memory.
  const gzipped = new Map<string, Buffer>();
  const gzipOf = (path: string): Buffer | null => {
    const kept = gzipped.get(path);
    if (kept) return kept;
    const file = join(dir, path);
    if (!/^\/assets\/[\w.-]+\.(js|css|svg)$/.test(path) || !existsSync(file)) return null;
    const gz = gzipSync(readFileSync(file), { level: 9 });
    gzipped.set(path, gz);
    return gz;
  };
  router.use((req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !isPanelPath(req.path)) return next();
    res.setHeader('Content-Security-Policy', CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'same-origin');
    const gz = req.path.startsWith('/assets/') && /\bgzip\b/.test(req.headers['accept-encoding'] ?? '') ? gzipOf(req.path) : null;
    if (gz) {
      res.setHeader('Content-Encoding', 'gzip');
      res.setHeader('Vary', 'Accept-Encoding');
      res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
      res.type(req.path.split('.').pop()!);
      return res.end(req.method === 'HEAD' ? undefined : gz);
    }
    assets(req, res, () => {
      // A missing asset is a 404, never the page in its place.
      if (/\.[A-Za-z0-9]+$/.test(req.path)) return next(new NotFoundError());
      if (!existsSync(index)) return next(new UnavailableError('The control panel is not built: run npm run build:web'));
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(index);
    });
  });
  return router;
}
