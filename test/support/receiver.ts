import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingMessage['headers'];
  body: any;
}

/**
 * A local HTTP receiver of JSON POSTs (a channel's or a webhook's far end); `status` decides each answer, and `null`
 * holds the request unanswered, as a stalled receiver does (until `close`).
 */
export async function receiver(status: () => number | null = () => 200): Promise<{ url: string; received: Received[]; close(): Promise<void>; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: JSON.parse(text) });
      const answer = status();
      if (answer === null) return;
      res.statusCode = answer;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const close = () => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, server, close };
}
