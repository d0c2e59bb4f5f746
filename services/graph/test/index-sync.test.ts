import assert from 'node:assert/strict';
import { createLogger } from '@tempora/kit/observability';
import { dropDatabase } from '../../../test/support/database.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { localChangeFeed } from '../src/change-feed.ts';
import { CAUSAL_TYPES, PATH_DEFAULT_TYPES } from '../src/domain/edge-types.ts';
import { GraphService, MomentNotFound } from '../src/graph-service.ts';
import { record } from './fixtures.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

const a = '/1600/may/1/1200/syncland/x/y/first';
const b = '/1601/may/1/1200/syncland/x/y/second';
const c = '/1602/may/1/1200/syncland/x/y/third';

describe('graph replicas share index updates through LISTEN/NOTIFY', function () {
  this.timeout(60_000);
  let one: GraphHarness;
  let two: GraphHarness;

  before(async () => {
    one = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    two = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' }, one.databaseUrl);
  });
  after(async () => {
    await two?.stop();
    await one?.stop();
    if (one) await dropDatabase(one.databaseUrl);
  });

  it('a write on one replica is traversable on the other', async () => {
    assert.equal((await one.post('/ingest/tdf', [record(a, [{ target: b, type: 'causes' }]), record(b)], writer)).status, 200);
    const nodes = await waitFor(
      'both moments on the other replica',
      async () => {
        // Until the notification arrives the other replica does not know the moment yet: 404, then the nodes.
        const response = await two.get(`/api/v1/graph/traverse${a}?direction=future`, serviceKey);
        const ids: string[] = response.status === 200 ? response.body.nodes.map((node: { id: string }) => node.id) : [];
        return ids.length === 2 && ids;
      },
      { timeoutMs: 20_000 },
    );
    assert.deepEqual(nodes, [a, b]);
    assert.equal(two.instance.graph.indexStats.loaded, true, 'answered from the index, not SQL');

    assert.equal((await two.post('/ingest/tdf', [record(c), record(b, [{ target: c, type: 'causes' }])], writer)).status, 200);
    const path = await waitFor(
      "the path through the other replica's write",
      async () => {
        const response = await one.get(`/api/v1/graph/path?from=${a}&to=${c}`, serviceKey);
        return response.status === 200 && response.body.found === true && (response.body as { hops: number });
      },
      { timeoutMs: 20_000 },
    );
    assert.equal(path.hops, 2);
  });

  it('answers from SQL, before the in-memory graph has loaded, exactly as from memory', async () => {
    const loaded = two.instance.graph;
    const unloaded = new GraphService(loaded.repository, localChangeFeed, { autoLinkMaxPerType: 0, rebuildRatio: 1 }, createLogger('graph', 'silent'));
    assert.equal(unloaded.indexStats.loaded, false);
    for (const direction of ['past', 'future', 'both'] as const) {
      const options = { direction, depth: 3, types: [...CAUSAL_TYPES], limit: 100, minWeight: 0 };
      assert.deepEqual(await unloaded.traverse(b, options), await loaded.traverse(b, options), direction);
    }
    const pathOptions = { maxHops: 6, types: [...PATH_DEFAULT_TYPES] };
    assert.deepEqual(await unloaded.path(a, c, pathOptions), await loaded.path(a, c, pathOptions));
    await assert.rejects(
      unloaded.traverse('/1600/may/1/1200/syncland/x/y/nowhere', { direction: 'both', depth: 1, types: [...CAUSAL_TYPES], limit: 10, minWeight: 0 }),
      MomentNotFound,
    );
  });
});
