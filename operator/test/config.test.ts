import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';

describe('operator configuration', function () {
  it('uses the conventions when the environment is empty', function () {
    const config = loadConfig({});
    assert.equal(config.port, 8090);
    assert.equal(config.leaderElection, true);
    assert.equal(config.resyncMs, 600_000);
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
