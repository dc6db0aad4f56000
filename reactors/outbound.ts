import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Which addresses the platform's own HTTP requests may reach: channels'
 * receivers, rules' channel actions and network servers' APIs, whose URLs
 * users write. `public`: public addresses only; `private`: also the private
 * ranges (RFC 1918, carrier-grade NAT, unique local IPv6); `any`: also
 * loopback, link-local (cloud metadata services) and the rest.
 */
export type OutboundTargets = 'public' | 'private' | 'any';
export const OUTBOUND_TARGETS: readonly OutboundTargets[] = ['public', 'private', 'any'];

/** The platform's HTTP client for URLs users write, bound to the `OUTBOUND_TARGETS` policy. */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** A request refused before any connection: the address is outside `OUTBOUND_TARGETS`. */
export class OutboundRefused extends Error {
  readonly code = 'EOUTBOUNDREFUSED';
  constructor(host: string, address: string, targets: OutboundTargets) {
    super(`${host} is ${address}, which is not ${targets === 'public' ? 'a public address' : 'a public or private address'} (OUTBOUND_TARGETS=${targets})`);
  }
}

const blocks = (ranges: [string, number][]): BlockList => {
  const list = new BlockList();
  for (const [net, prefix] of ranges) list.addSubnet(net, prefix, net.includes(':') ? 'ipv6' : 'ipv4');
  return list;
};

/** Never reached unless `any`: this host, link-local (metadata services), unspecified, multicast, broadcast, reserved. */
const LOCAL = blocks([
  ['0.0.0.0', 8], ['127.0.0.0', 8], ['169.254.0.0', 16], ['192.0.0.0', 24], ['192.0.2.0', 24], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
  ['::', 128], ['::1', 128], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['64:ff9b::', 96], ['2002::', 16],
]);
/** Reached with `private` or `any`. */
const PRIVATE = blocks([['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['100.64.0.0', 10], ['fc00::', 7]]);

/** Whether `targets` lets a request reach `address` (an IPv4 or IPv6 literal). */
export function reachable(address: string, targets: OutboundTargets): boolean {
  if (targets === 'any') return true;
  // An IPv4-mapped IPv6 address is the IPv4 address it maps.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const ip = mapped ? mapped[1]! : address;
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  if (LOCAL.check(ip, family)) return false;
  return targets === 'private' || !PRIVATE.check(ip, family);
}

/**
 * A fetch whose every connection, redirects included, goes only to addresses
 * `targets` allows. The check sits in the connection's own name lookup, so a
 * name that resolves to another address by the time of the request (DNS
 * rebinding) is checked on the address actually connected to.
 */
export function outboundFetch(targets: OutboundTargets): Fetch {
  if (targets === 'any') return (url, init) => fetch(url, init);
  const lookup = (hostname: string, options: LookupOptions, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const allowed = addresses.filter((a) => reachable(a.address, targets));
      if (allowed.length === 0) return callback(new OutboundRefused(hostname, addresses[0]?.address ?? 'no address', targets), []);
      if (options.all) return callback(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
  const agent = new Agent({ connect: { lookup: lookup as never } });
  return async (url, init) => {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
    // A literal address is connected to without a lookup.
    if (isIP(host) && !reachable(host, targets)) throw new TypeError('fetch failed', { cause: new OutboundRefused(host, host, targets) });
    return (await undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as Response;
  };
}

/** The most of an answer's body the platform reads: what a receiver or a network server says, never a flood. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/** The answer's body as text, cut at `MAX_ANSWER_BYTES`; the rest is not read (the connection is cancelled). */
export async function answerText(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_ANSWER_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // A body cut short reads as what came.
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
}

/** A failed request's reason, with its cause: `fetch failed` alone says nothing. */
export function failureOf(err: unknown): string {
  const message = (err as Error).message;
  const cause = (err as { cause?: { message?: unknown } }).cause?.message;
  return typeof cause === 'string' && cause && cause !== message ? `${message}: ${cause}` : message;
}
