import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Platform, startPlatform } from '../support/platform.ts';
import { readmeTour, runTour } from '../support/readme-tour.ts';

/**
 * The README's tour as a newcomer runs it, against a fresh `npm start`, twice in a row. Only the ports
 * differ (a second platform must not collide with one a developer runs), and curl fails on an HTTP error
 * instead of printing it, so every command must succeed; an SSE `error` event fails the tour too, and so
 * does a watch loop that ran out of time.
 */
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
    it(`runs clean, pass ${pass}`, async () => {
      const run = await runTour(readmeTour(platform.urls, { strict: true, stripe: platform.stripe }), workDir);
      const said = `${run.stdout}\n--- stderr ---\n${run.stderr}`.slice(-6000);
      assert.equal(run.status, 0, `the tour failed:\n${said}`);
      assert.doesNotMatch(run.stdout, /^event: error$/m, `a stream ended in an error:\n${said}`);
      // The watch loops end quietly when their time runs out: what they waited for must have been printed.
      assert.match(run.stdout, /^2 active$/m, `the moment's life never reached its scene:\n${said}`);
      assert.match(run.stdout, /^archived private$/m, `the Judge never archived the spam:\n${said}`);
      assert.match(run.stdout, /^304$/m, `the image was not revalidated with a 304:\n${said}`);
    });
  }
});
