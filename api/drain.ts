import type { Server, ServerResponse } from 'node:http';

/**
 * The HTTP server's side of a stop. Requests under way are let finish, up to a
 * deadline, while the parts they wait for (the projection runner for a
 * write's read-your-writes, the ingest pipeline for an uplink, the command
 * reactor for a command's outcome) still run; only then are the connections
 * that remain cut:
 *
 * 1. `stopping` turns true (health answers 503 `stopping` from here on) and the
 *    server stops accepting connections;
 * 2. idle keep-alive connections are closed, and so is each connection whose
 *    request under way is answered; a request that still arrives on a
 *    connection already open (sent before the client learnt of the stop) is
 *    answered, with `Connection: close`;
 * 3. `drain` resolves when no request is under way, or at the deadline;
 * 4. `close` cuts whatever is left and resolves once the server is closed.
 */
export class HttpDrain {
  private readonly inFlight = new Set<ServerResponse>();
  private draining = false;
  private closed: Promise<void> | null = null;
  private settled: (() => void) | null = null;

  /** Register before the application's own `request` listener, so a request arriving during a stop is marked first. */
  constructor(private readonly server: Server) {
    server.on('request', (_req, res: ServerResponse) => {
      this.inFlight.add(res);
      if (this.draining) closeAfter(res);
      res.once('close', () => {
        this.inFlight.delete(res);
        if (!this.draining) return;
        this.server.closeIdleConnections();
        if (this.inFlight.size === 0) this.settled?.();
      });
    });
  }

  /** True from the start of a stop. */
  get stopping(): boolean {
    return this.draining;
  }

  /** Stops accepting, closes idle connections and waits for the requests under way until `deadline`; answers how many were still under way then. */
  async drain(deadline: number): Promise<number> {
    if (!this.draining) {
      this.draining = true;
      this.closed = new Promise((resolve) => this.server.close(() => resolve()));
      this.server.closeIdleConnections();
    }
    if (this.inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.settled = resolve;
        timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
      });
      clearTimeout(timer);
      this.settled = null;
    }
    return this.inFlight.size;
  }

  /** Cuts the connections that remain (requests past the deadline, WebSockets the broker has not ended) and waits for the server to close. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.draining = true;
      this.closed = new Promise((resolve) => this.server.close(() => resolve()));
    }
    this.server.closeAllConnections();
    await this.closed;
  }
}

/** The connection of `res` closes once it is answered. */
function closeAfter(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
}
