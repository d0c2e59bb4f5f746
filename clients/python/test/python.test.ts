/**
 * tempora-client (clients/python) in a venv of pinned packages: its generated code is what a fresh generation
 * makes (drift gate), and its pytest suites pass, against a tiny local server (tests/test_fail_closed.py) and
 * against the whole platform on the test PostgreSQL and Redis (tests/test_platform.py).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Platform, startPlatform } from '../../../test/support/platform.ts';
import { clientDirectory, generatedFiles, venv } from '../scripts/generate.ts';

/** Runs pytest on the given files of tests/ with the package installed; fails with its output unless all of them pass. */
function pytest(files: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    return execFileSync(venv().bin('pytest'), ['-q', '-p', 'no:cacheprovider', ...files], {
      cwd: join(clientDirectory, 'tests'),
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`pytest ${files.join(' ')} failed:\n${stdout?.slice(-6000)}\n${stderr?.slice(-2000)}`);
  }
}

describe('tempora-client (Python)', function () {
  before(function () {
    this.timeout(900_000);
    // Installed from a copy, so the build leaves nothing (build/, *.egg-info) in the work tree.
    const copy = mkdtempSync(join(tmpdir(), 'tempora-client-package-'));
    try {
      for (const name of ['pyproject.toml', 'src']) cpSync(join(clientDirectory, name), join(copy, name), { recursive: true });
      execFileSync(venv().bin('pip'), ['install', '--quiet', '--disable-pip-version-check', '--no-deps', '--no-build-isolation', '--force-reinstall', copy], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('is what scripts/generate.ts makes of the committed documents (drift gate)', function () {
    this.timeout(300_000);
    for (const [name, text] of Object.entries(generatedFiles()))
      assert.ok(
        readFileSync(join(clientDirectory, name), 'utf8') === text,
        `clients/python/${name} differs from a fresh generation: run \`node clients/python/scripts/generate.ts\``,
      );
  });

  it('fails closed, types problems, retries only where safe and reads event streams (pytest, against a local server)', function () {
    this.timeout(120_000);
    assert.match(pytest(['test_fail_closed.py']), /\b14 passed\b/);
  });

  describe('against the running platform', () => {
    let platform: Platform;
    let databaseUrl: string;

    before(async function () {
      this.timeout(300_000);
      databaseUrl = await createDatabase('pyclient');
      platform = await startPlatform({ shared: { databaseUrl, redisUrl: process.env.REDIS_URL! } });
    });

    after(async function () {
      this.timeout(60_000);
      await platform?.stop();
      if (databaseUrl) await dropDatabase(databaseUrl);
    });

    it('runs a complete session, answers typed 404 and 422 problems, starts one run across a lost answer and honours Retry-After on a 429 (pytest)', function () {
      this.timeout(300_000);
      assert.match(pytest(['test_platform.py'], { TEMPORA_GATEWAY_URL: platform.urls.gateway }), /\b4 passed\b/);
    });
  });
});
