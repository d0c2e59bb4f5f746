import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { baseConfigSchema, ConfigError, loadConfig, metricsPort } from '../src/runtime/config.ts';

const node = process.execPath;
const graphMain = fileURLToPath(new URL('../../graph/src/main.ts', import.meta.url));

describe('kit config', () => {
  it('applies the conventions defaults', () => {
    const config = loadConfig(baseConfigSchema('graph'), {});
    assert.equal(config.PORT, 8082);
    assert.deepEqual(config.SERVICE_KEY, []);
    assert.equal(config.DATABASE_URL, undefined);
    assert.equal(config.TEMPORA_DATA_DIR, './.tempora');
    assert.equal(config.GENERATION_URL, 'http://127.0.0.1:8081');
    assert.equal(config.LOG_LEVEL, 'info');
  });

  it('serves /metrics on PORT + 1000 unless METRICS_PORT says otherwise, never on PORT itself', () => {
    assert.equal(metricsPort(loadConfig(baseConfigSchema('gateway'), {})), 9080);
    assert.equal(metricsPort(loadConfig(baseConfigSchema('billing'), { PORT: '3000' })), 4000);
    assert.equal(metricsPort(loadConfig(baseConfigSchema('graph'), { METRICS_PORT: '9100' })), 9100);
    assert.equal(metricsPort(loadConfig(baseConfigSchema('graph'), { PORT: '0' })), 0, 'an ephemeral API port, an ephemeral metrics port');
    assert.throws(() => metricsPort(loadConfig(baseConfigSchema('graph'), { PORT: '9000', METRICS_PORT: '9000' })), /METRICS_PORT: 9000 is PORT too/);
    assert.throws(() => metricsPort(loadConfig(baseConfigSchema('graph'), { PORT: '65000' })), /set METRICS_PORT/);
    assert.throws(() => loadConfig(baseConfigSchema('graph'), { METRICS_PORT: '70000' }), /METRICS_PORT:/);
  });

  it('parses comma-separated keys', () => {
    assert.deepEqual(loadConfig(baseConfigSchema('gateway'), { SERVICE_KEY: ' a , b,,c ' }).SERVICE_KEY, ['a', 'b', 'c']);
  });

  it('names every invalid variable at once', () => {
    assert.throws(
      () =>
        loadConfig(baseConfigSchema('graph').extend({ EXTRA: z.coerce.number().int() }), {
          PORT: 'eighty',
          LOG_LEVEL: 'loud',
          DATABASE_URL: 'not a url',
          EXTRA: 'x',
        }),
      (error: unknown) => error instanceof ConfigError && ['PORT', 'LOG_LEVEL', 'DATABASE_URL', 'EXTRA'].every((name) => error.message.includes(`  ${name}:`)),
    );
  });

  it('makes a service exit 1 with a clear message on an invalid environment', function () {
    this.timeout(30_000);
    const result = spawnSync(node, [graphMain], {
      env: { ...process.env, PORT: '99999', WRITER_TOKENS: 'broken', OTEL_SDK_DISABLED: 'true' },
      encoding: 'utf8',
      timeout: 25_000,
    });
    assert.equal(result.status, 1, result.stderr);
    assert.match(result.stderr, /graph: invalid environment/);
    assert.match(result.stderr, /PORT:/);
    assert.match(result.stderr, /WRITER_TOKENS:/);
    assert.doesNotMatch(result.stderr, /at .*\.ts:\d+/, 'no stack trace');
  });
});
