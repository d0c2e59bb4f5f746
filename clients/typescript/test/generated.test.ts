import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { publicSurface, renderGenerated } from '../scripts/surface.ts';

describe('@tempora/client generated code', () => {
  it('is what `npm run generate` makes of the committed documents (drift gate)', async function () {
    this.timeout(60_000);
    const fresh = await renderGenerated(publicSurface());
    for (const [name, text] of Object.entries(fresh)) {
      const committed = readFileSync(new URL(`../src/generated/${name}`, import.meta.url), 'utf8');
      assert.ok(committed === text, `src/generated/${name} differs from a fresh generation: run \`npm run generate -w @tempora/client\``);
    }
  });

  it('covers every public operation and none of the service-only ones', () => {
    const operations = Object.entries(publicSurface().paths).flatMap(([path, item]) => Object.keys(item as object).map((method) => `${method} ${path}`));
    for (const expected of [
      'post /api/v1/auth/demo',
      'post /api/v1/auth/apple',
      'post /api/v1/auth/google',
      'post /api/v1/auth/github',
      'post /api/v1/auth/refresh',
      'post /api/v1/users/me/api-keys',
      'get /api/v1/credits/balance',
      'post /api/v1/timepoints/generate/stream',
      'post /api/v1/timepoints/generate',
      'get /api/v1/users/me/timepoints',
      'get /api/v1/graph/stats',
      'get /api/v1/graph/moments',
      'get /api/v1/graph/moments/{path}',
      'post /api/v1/simulate',
      'get /api/v1/simulations/{id}/events',
      'post /api/v1/conductor/messages',
      'post /api/v1/billing/checkout',
    ])
      assert.ok(operations.includes(expected), `${expected} is missing`);
    for (const refused of [
      'post /api/v1/credits/charge',
      'post /api/v1/auth/introspect',
      'post /api/v1/billing/webhooks/stripe',
      'get /api/v1/stats',
      'post /ingest/tdf',
    ])
      assert.ok(!operations.includes(refused), `${refused} is not public`);
    assert.ok(!operations.some((operation) => operation.includes('{user_id}')));
  });

  it('imports nothing from node: and no package but openapi-fetch in src/, so it runs in browsers', () => {
    const directory = new URL('../src/', import.meta.url);
    const files = readdirSync(directory, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'));
    assert.ok(files.includes('generated/validators.ts'));
    for (const name of files) {
      const source = readFileSync(new URL(name, directory), 'utf8');
      const imported = [...source.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((match) => match[1]!);
      const foreign = imported.filter((specifier) => !specifier.startsWith('./') && !specifier.startsWith('../') && specifier !== 'openapi-fetch');
      assert.deepEqual(foreign, [], `src/${name} imports ${foreign.join(', ')}`);
      assert.ok(!/\brequire\(/.test(source), `src/${name} requires`);
    }
  });
});
