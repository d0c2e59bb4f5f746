import assert from 'node:assert/strict';
import { startGraph, serviceKey, writer, type GraphHarness } from './harness.ts';
import { record } from './fixtures.ts';
import { dropDatabase } from '../../../test/support/database.ts';

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
    const deadline = Date.now() + 5_000;
    let nodes: string[] = [];
    while (Date.now() < deadline) {
      nodes = (await two.get(`/api/v1/graph/traverse${a}?direction=future`, serviceKey)).body.nodes.map((node: { id: string }) => node.id);
      if (nodes.length === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(nodes, [a, b]);
    assert.equal(two.instance.graph.indexStats.loaded, true, 'answered from the index, not SQL');

    assert.equal((await two.post('/ingest/tdf', [record(c), record(b, [{ target: c, type: 'causes' }])], writer)).status, 200);
    let path = { found: false, hops: 0 };
    while (Date.now() < deadline + 5_000 && !path.found) {
      path = (await one.get(`/api/v1/graph/path?from=${a}&to=${c}`, serviceKey)).body;
      if (!path.found) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(path.hops, 2);
  });

  it('answers from SQL identically while the index rebuilds', async () => {
    const fromIndex = (await two.get(`/api/v1/graph/traverse${a}?direction=future&depth=3`, serviceKey)).body;
    const rebuilding = two.instance.graph.rebuild();
    const fromSql = (await two.get(`/api/v1/graph/traverse${a}?direction=future&depth=3`, serviceKey)).body;
    await rebuilding;
    assert.deepEqual(fromSql, fromIndex);
  });
});
