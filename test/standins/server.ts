import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The HTTP side every network-server stand-in shares: a server on a free
 * loopback port, and `mode` to take it down (`'down'`: every connection, a
 * kept-alive one too, dies at once) or to whatever failure the stand-in adds.
 */
export abstract class HttpStandIn<Mode extends string> {
  mode = 'up' as Mode | 'up' | 'down';
  url = '';
  private readonly server: Server = createServer((req, res) => {
    // Down: a kept-alive connection dies as a new one would.
    if (this.mode === 'down') return void req.socket.destroy();
    void this.serve(req, res);
  });

  protected abstract serve(req: IncomingMessage, res: ServerResponse): Promise<void>;

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.server.on('connection', (socket) => {
      if (this.mode === 'down') socket.destroy();
    });
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
