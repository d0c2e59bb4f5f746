/**
 * tempora-client (clients/python) against the platform's recorded answers: pytest runs
 * tests/test_fixtures.py, which replays each fixture of clients/fixtures/recorded/ through the client.
 * The package is imported from src/ (PYTHONPATH), so nothing is installed and the work tree stays clean.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { committedFixtures } from '../../fixtures/fixture.ts';
import { clientDirectory, venv } from '../scripts/generate.ts';

describe('tempora-client (Python) against the recorded fixtures', () => {
  it('returns each recorded answer as its model and raises each recorded problem typed, Retry-After included (pytest)', function () {
    this.timeout(300_000);
    let output: string;
    try {
      output = execFileSync(venv().bin('pytest'), ['-q', '-p', 'no:cacheprovider', 'test_fixtures.py'], {
        cwd: join(clientDirectory, 'tests'),
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: join(clientDirectory, 'src') },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(`pytest test_fixtures.py failed:\n${stdout?.slice(-8000)}\n${stderr?.slice(-2000)}`);
    }
    // One test per fixture and the one that checks the session has its problems.
    assert.match(output, new RegExp(`\\b${committedFixtures().length + 1} passed\\b`));
  });
});
