import assert from 'node:assert/strict';
import { readSeed } from '../src/seed.ts';
import { type GraphHarness, serviceKey, startGraph } from './harness.ts';

describe('graph seed data set', function () {
  this.timeout(180_000);
  const seed = readSeed();

  it('holds at least 400 real moments from before 3000 BCE to this decade in 50+ countries', () => {
    assert.ok(seed.length >= 400, `${seed.length} moments`);
    const years = seed.map((moment) => Number(moment.path.split('/')[1]));
    assert.ok(Math.min(...years) < -3000);
    assert.ok(Math.max(...years) >= 2020);
    const countries = new Set(seed.map((moment) => moment.path.split('/')[5]));
    assert.ok(countries.size >= 50, `${countries.size} countries`);
    assert.equal(new Set(seed.map((moment) => moment.path)).size, seed.length, 'paths are unique');
    for (const moment of seed) {
      assert.ok(moment.figures.length > 0 && moment.tags.length > 0 && moment.description.length > 10, moment.path);
      assert.ok(moment.latitude !== null && moment.longitude !== null, moment.path);
    }
  });

  it('has at least 500 hand-made causal edges of the listed types, pointing the right way in time', () => {
    const year = (path: string) => Number(path.split('/')[1]);
    const edges = seed.flatMap((moment) => moment.edges.map((edge) => ({ ...edge, source: moment.path })));
    assert.ok(edges.length >= 500, `${edges.length} edges`);
    const types = new Set(edges.map((edge) => edge.type));
    for (const type of ['causes', 'caused_by', 'precedes', 'follows', 'influences', 'same_conflict', 'same_figure']) assert.ok(types.has(type as never), type);
    for (const edge of edges) {
      if (['causes', 'precedes', 'influences'].includes(edge.type))
        assert.ok(year(edge.source) <= year(edge.target), `${edge.source} ${edge.type} ${edge.target}`);
      if (['caused_by', 'follows'].includes(edge.type)) assert.ok(year(edge.source) >= year(edge.target), `${edge.source} ${edge.type} ${edge.target}`);
    }
  });

  describe('loaded into the service', () => {
    let h: GraphHarness;
    before(async () => {
      h = await startGraph({ GRAPH_SEED: 'true' });
    });
    after(() => h?.stop());

    it('is loaded on first start and idempotently on the next', async () => {
      const stats = (await h.get('/api/v1/stats')).body;
      assert.equal(stats.total_nodes, seed.length);
      assert.equal(stats.source_type_counts.seed, seed.length);
      for (const type of ['contemporaneous', 'same_location', 'thematic']) {
        assert.ok(stats.edge_type_counts[type] <= (seed.length * 8) / 2, `${type}: at most 8 automatic links per moment`);
      }
      const again = await startGraph({ GRAPH_SEED: 'true' }, h.databaseUrl);
      try {
        assert.deepEqual((await again.get('/api/v1/stats')).body.total_edges, stats.total_edges);
      } finally {
        await again.server.close();
      }
    });

    it('supports long causal chains across the ages', async () => {
      const reply = (await h.get('/api/v1/moments?q=marathon&limit=1')).body;
      const anchor = reply.items[0].path as string;
      const future = (await h.get(`/api/v1/graph/traverse${anchor}?direction=future&depth=4`, serviceKey)).body;
      assert.ok(future.node_count >= 5, `${future.node_count} moments follow ${anchor}`);
      const latest = (await h.get('/api/v1/moments?sort=-year&limit=1')).body.items[0].path as string;
      const path = (await h.get(`/api/v1/graph/path?from=${anchor}&to=${latest}&max_hops=10`, serviceKey)).body;
      assert.equal(path.found, true);
    });
  });
});
