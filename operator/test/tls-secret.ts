// A TLS Secret as `kubectl create secret tls` or cert-manager leaves it, holding a self-signed certificate
// that openssl makes (node:crypto reads certificates but cannot issue one).
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../src/kube/object.ts';

/** A `kubernetes.io/tls` Secret for `host`, valid for `days` from now, and when its certificate expires. */
export function tlsSecret(name: string, namespace: string, host: string, days: number): { secret: KubeObject; notAfter: Date } {
  const dir = mkdtempSync(join(tmpdir(), 'tempora-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        'tls.key',
        '-out',
        'tls.crt',
        '-days',
        String(days),
        '-subj',
        `/CN=${host}`,
        '-addext',
        `subjectAltName=DNS:${host}`,
      ],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const [crt, key] = ['tls.crt', 'tls.key'].map((file) => readFileSync(join(dir, file)));
    return {
      secret: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace },
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': crt!.toString('base64'), 'tls.key': key!.toString('base64') },
      },
      notAfter: new X509Certificate(crt!).validToDate,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
