import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PORTS, type ServiceName } from '../../services/kit/src/runtime/config.ts';
import { startPlatform, type Platform } from '../support/platform.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The README's tour as a newcomer runs it: its shell blocks, in order, against a fresh `npm start`, twice
 * in a row. Only the ports differ (a second platform must not collide with one a developer runs), and curl
 * fails on an HTTP error instead of printing it, so every command must succeed; an SSE `error` event fails
 * the tour too.
 */
export function readmeTour(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const tour = readme.slice(readme.indexOf('## A five-minute tour'), readme.indexOf('\n## ', readme.indexOf('## A five-minute tour') + 1));
  const blocks = [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
  assert.ok(blocks.length >= 2, 'the README has a tour');
  return blocks.join('\n');
}

describe('the README tour, twice on a fresh npm start', function () {
  this.timeout(600_000);
  let platform: Platform;
  const workDir = mkdtempSync(join(tmpdir(), 'tempora-tour-cwd-'));

  before(async () => {
    platform = await startPlatform();
  });

  after(async () => {
    await platform?.stop();
    rmSync(workDir, { recursive: true, force: true });
  });

  for (const pass of [1, 2]) {
    it(`runs clean, pass ${pass}`, () => {
      let script = readmeTour().replaceAll(/curl -s /g, 'curl -sS --fail-with-body ');
      for (const [service, url] of Object.entries(platform.urls)) script = script.replaceAll(`http://127.0.0.1:${DEFAULT_PORTS[service as ServiceName]}`, url);
      const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: workDir, encoding: 'utf8', timeout: 300_000 });
      const said = `${run.stdout}\n--- stderr ---\n${run.stderr}`.slice(-6000);
      assert.equal(run.status, 0, `the tour failed:\n${said}`);
      assert.doesNotMatch(run.stdout, /^event: error$/m, `a stream ended in an error:\n${said}`);
    });
  }
});
