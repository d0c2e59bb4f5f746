import assert from 'node:assert/strict';
import knexFactory from 'knex';
import { migrations } from '../src/migrations.ts';
import { type GraphHarness, startGraph, writer } from './harness.ts';

/** Placeholders earlier versions published offline are withdrawn by the upgrade (migration 006). */
describe('graph: an upgrade withdraws the offline placeholders earlier versions published', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  before(async () => {
    h = await startGraph();
  });
  after(async () => {
    await h?.stop();
  });

  it('archives Daily "Chronicle entry" and Expander "Aftermath" moments, empties placeholder descriptions, leaves the rest', async () => {
    const records = [
      { path: '/1900/may/1/1200/unknown/unknown/unknown/chronicle-entry-1', event_name: 'Chronicle entry 1 for May 1', source_type: 'daily' },
      {
        path: '/1901/may/1/1200/testland/north/alpha/aftermath',
        event_name: 'Aftermath of a thing',
        description: 'Placeholder proposed offline: what followed a thing.',
      },
      {
        path: '/1902/may/1/1200/testland/north/alpha/described',
        event_name: 'A real thing',
        description: 'Placeholder written offline (no text model is configured): A real thing, 1 May 1902.',
      },
      { path: '/1903/may/1/1200/testland/north/alpha/kept', event_name: 'Chronicle entry of a real chronicle', description: 'Written by a person.' },
    ];
    assert.equal(
      (
        await h.post(
          '/ingest/tdf',
          records.map((payload) => ({ payload })),
          writer,
        )
      ).status,
      200,
    );
    const knex = knexFactory({ client: 'pg', connection: h.databaseUrl });
    try {
      await knex('moments').where({ path: records[0]!.path }).update({ source_type: 'daily' });
      await migrations.find((migration) => migration.name === '006_withdraw_offline_placeholders')!.up(knex);
      const rows = await knex('moments')
        .whereIn(
          'path',
          records.map((record) => record.path),
        )
        .orderBy('path')
        .select('path', 'status', 'visibility', 'description');
      const byPath = new Map(rows.map((row) => [row.path, row]));
      assert.deepEqual([byPath.get(records[0]!.path)!.status, byPath.get(records[0]!.path)!.visibility], ['archived', 'private']);
      assert.deepEqual([byPath.get(records[1]!.path)!.status, byPath.get(records[1]!.path)!.visibility], ['archived', 'private']);
      assert.equal(byPath.get(records[2]!.path)!.description, '');
      assert.notEqual(byPath.get(records[2]!.path)!.status, 'archived');
      assert.equal(byPath.get(records[3]!.path)!.description, 'Written by a person.');
      assert.notEqual(byPath.get(records[3]!.path)!.status, 'archived', 'a moment a person wrote stays');
    } finally {
      await knex.destroy();
    }
  });
});
