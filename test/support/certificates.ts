import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** PEM files made with Debian's `openssl` for one test run: a CA, a server certificate it signed, and a CA nobody trusts. */
export interface Certificates {
  dir: string;
  /** The CA that signed the server certificate: what a client trusts. */
  ca: string;
  /** The server certificate (for `localhost` and 127.0.0.1) and its key. */
  cert: string;
  key: string;
  /** A CA that signed nothing the server presents. */
  otherCa: string;
  /** A self-signed certificate and key that are not a pair with `key`. */
  strayCert: string;
  remove(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function makeCertificates(): Certificates {
  const dir = mkdtempSync(join(tmpdir(), 'tls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ca = (name: string, file: string) =>
    openssl('req', '-x509', ...EC, '-days', '2', '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign', '-keyout', `${file}.key`, '-out', `${file}.pem`);
  ca('Platform test CA', 'ca');
  ca('Unrelated CA', 'other-ca');
  openssl('req', ...EC, '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'server.pem');
  openssl('req', '-x509', ...EC, '-days', '2', '-subj', '/CN=stray', '-keyout', 'stray.key', '-out', 'stray.pem');
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    cert: join(dir, 'server.pem'),
    key: join(dir, 'server.key'),
    otherCa: join(dir, 'other-ca.pem'),
    strayCert: join(dir, 'stray.pem'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
