import assert from 'node:assert/strict';
import { record } from './fixtures.ts';
import { type GraphHarness, startGraph, writer } from './harness.ts';

describe('graph auto-linking', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '3' });
  });
  after(() => h?.stop());

  it('links contemporaneous, same-location and thematic moments, at most K per type per moment', async () => {
    const town = (n: number, year: number) => `/${year}/may/${n + 1}/1200/autoland/east/town/event-${n}`;
    const records = Array.from({ length: 8 }, (_, n) => record(town(n, 1800 + (n % 2)), [], { tags: ['shared-theme', `own-${n}`] }));
    records.push(record('/1700/may/1/1200/elsewhere/west/city/far-away', [], { tags: ['unrelated'] }));
    assert.equal((await h.post('/ingest/tdf', records, writer)).status, 200);
    for (let n = 0; n < 8; n += 1) {
      const edges = (await h.get(`/api/v1/moments/${town(n, 1800 + (n % 2)).slice(1)}`)).body.edges as Array<{ type: string; weight: number }>;
      for (const [type, weight] of [
        ['contemporaneous', 0.5],
        ['same_location', 0.5],
        ['thematic', 0.3],
      ] as const) {
        const ofType = edges.filter((edge) => edge.type === type);
        assert.ok(ofType.length <= 3, `${type} bounded: ${ofType.length}`);
        assert.ok(ofType.every((edge) => edge.weight === weight));
      }
    }
    const far = (await h.get('/api/v1/moments/1700/may/1/1200/elsewhere/west/city/far-away')).body;
    assert.equal(far.edge_count, 0);
    const stats = (await h.get('/api/v1/stats')).body;
    assert.ok(stats.edge_type_counts.same_location > 0 && stats.edge_type_counts.thematic > 0 && stats.edge_type_counts.contemporaneous > 0);
    assert.ok(stats.total_edges <= (8 * 3 * 3) / 2 + 8 * 3, 'linear in the number of moments');
  });

  it('links across the BCE/CE boundary, which has no year 0', async () => {
    assert.equal(
      (await h.post('/ingest/tdf', [record('/-1/june/1/1200/bceland/a/b/last-bce'), record('/1/june/1/1200/celand/c/d/first-ce')], writer)).status,
      200,
    );
    const edges = (await h.get('/api/v1/moments/-1/june/1/1200/bceland/a/b/last-bce')).body.edges;
    assert.ok(edges.some((edge: { type: string; target: string; source: string }) => edge.type === 'contemporaneous'));
  });
});
