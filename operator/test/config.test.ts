import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, serviceUrl } from '../src/config.ts';

describe('operator configuration', function () {
  it('uses the conventions when the environment is empty', function () {
    const config = loadConfig({});
    assert.equal(config.port, 8090);
    assert.equal(config.leaderElection, true);
    assert.equal(config.resyncMs, 600_000);
    assert.equal(config.budgetPollMs, 30_000);
    assert.equal(serviceUrl(config.serviceUrlTemplate, 'prod-simulation', 'tempora', 8083), 'http://prod-simulation.tempora.svc:8083');
  });

  it("reaches the platform's Services through SERVICE_URL_TEMPLATE, e.g. kubectl proxy", function () {
    const proxy = loadConfig({ SERVICE_URL_TEMPLATE: 'http://127.0.0.1:8001/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/' });
    assert.equal(
      serviceUrl(proxy.serviceUrlTemplate, 'prod-simulation', 'tempora', 8083),
      'http://127.0.0.1:8001/api/v1/namespaces/tempora/services/prod-simulation:8083/proxy',
    );
    assert.throws(() => loadConfig({ SERVICE_URL_TEMPLATE: 'ftp://{service}' }), /SERVICE_URL_TEMPLATE/);
    assert.throws(() => loadConfig({ BUDGET_POLL_SECONDS: '0' }), /BUDGET_POLL_SECONDS/);
  });

  it('exits 1 with a clear message on an invalid environment', function () {
    const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'main.ts');
    const run = spawnSync(process.execPath, [main], { env: { ...process.env, OPERATOR_PORT: 'eighty', LEADER_ELECTION: 'maybe' }, encoding: 'utf8' });
    assert.equal(run.status, 1);
    assert.match(run.stderr, /invalid operator environment/);
    assert.match(run.stderr, /OPERATOR_PORT/);
    assert.match(run.stderr, /LEADER_ELECTION/);
  });
});
