import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { loadConnection } from '../src/kube/connection.ts';

describe('connection from a kubeconfig', function () {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'tempora-kubeconfig-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const kubeconfig = (user: Record<string, unknown>) => {
    const path = join(dir, 'config');
    writeFileSync(
      path,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'test',
        contexts: [{ name: 'test', context: { cluster: 'c', user: 'u' } }],
        clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:6443/', 'certificate-authority': 'ca.crt' } }],
        users: [{ name: 'u', user }],
      }),
    );
    writeFileSync(join(dir, 'ca.crt'), 'not checked here');
    return path;
  };

  it('reads the current context: server, files relative to the kubeconfig, a token file', async function () {
    writeFileSync(join(dir, 'token'), 'file-token');
    const c = loadConnection(kubeconfig({ 'token-file': join(dir, 'token') }));
    assert.equal(c.server, 'https://127.0.0.1:6443');
    assert.equal(String(c.agent.options.ca), readFileSync(join(dir, 'ca.crt'), 'utf8'));
    assert.equal((await c.headers()).Authorization, 'Bearer file-token');
  });

  it('runs an exec credential plugin', async function () {
    const plugin = `console.log(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: process.env.PREFIX + 'token', expirationTimestamp: new Date(Date.now() + 3600e3).toISOString() } }))`;
    const c = loadConnection(
      kubeconfig({
        exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: ['-e', plugin], env: [{ name: 'PREFIX', value: 'exec-' }] },
      }),
    );
    assert.equal((await c.headers()).Authorization, 'Bearer exec-token');
  });

  it('refuses what it cannot use, naming the problem', function () {
    assert.throws(() => loadConnection(kubeconfig({ username: 'admin', password: 'secret' })), /basic authentication/);
    assert.throws(() => loadConnection(join(dir, 'missing')), /cannot connect to Kubernetes/);
  });
});
