import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Database, oldestFirst, openDatabase, positionTime } from '../src/data/index.ts';
import { InvalidExportPosition, keysetPage, oldestFirstAfter, oldestFirstParts, oldestFirstPosition, UUID_ID } from '../src/http/account-data.ts';
import { createLogger } from '../src/observability/logger.ts';

/**
 * An export's keyset pages oldest first (services/kit/src/http/account-data.ts): rows that share a time to
 * the microsecond, and times a millisecond cannot tell apart, are each given once, in (time, id) order, on
 * PostgreSQL and on the embedded PGlite alike.
 */
describe('account export pages oldest first', function () {
  this.timeout(60_000);
  const logger = createLogger('kit-test', 'silent');
  const times = ['2026-01-01T00:00:00.000001Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000900Z'];
  const ids = [
    'ffffffff-0000-4000-8000-000000000000',
    'aaaaaaaa-0000-4000-8000-000000000000',
    '11111111-0000-4000-8000-000000000000',
    '00000000-0000-4000-8000-000000000000',
  ];

  async function pages(db: Database): Promise<string[]> {
    await db.knex.schema.createTable('rows', (t) => {
      t.uuid('id').primary();
      t.timestamp('created_at', { useTz: true }).notNullable();
    });
    await db.knex('rows').insert(ids.map((id, i) => ({ id, created_at: times[i] })));
    const read = async (after: string, limit: number) => {
      const parts = oldestFirstParts(after);
      const rows = (await oldestFirst(
        db
          .knex('rows')
          .select('id', positionTime(db.knex, 'created_at'))
          .limit(limit + 1),
        ['created_at', 'id'],
        parts && [parts.at, parts.id],
      )) as { id: string; position_at: string }[];
      return keysetPage(
        rows,
        limit,
        (row) => oldestFirstPosition(row.position_at, row.id),
        (row) => row.id,
      );
    };
    const seen: string[] = [];
    const form = oldestFirstAfter(UUID_ID);
    for (let after = ''; ; ) {
      const page = await read(after, 1);
      seen.push(...page.items);
      if (page.next === undefined) break;
      assert.match(page.next, form, 'a position the reader admits');
      after = page.next;
    }
    return seen;
  }

  const expected = [ids[0], ids[2], ids[1], ids[3]];

  it('on PostgreSQL', async () => {
    const url = await createDatabase('kit_oldest');
    const db = await openDatabase({ service: 'kittest', url, dataDir: '/nonexistent', migrations: [], logger });
    try {
      assert.deepEqual(await pages(db), expected);
    } finally {
      await db.close();
      await dropDatabase(url);
    }
  });

  it('on the embedded PGlite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kit-oldest-'));
    const db = await openDatabase({ service: 'kittest', url: undefined, dataDir: dir, migrations: [], logger });
    try {
      assert.deepEqual(await pages(db), expected);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('admits only positions of its form', () => {
    const form = oldestFirstAfter(UUID_ID);
    assert.ok(form.test(`2026-01-01T00:00:00.000001Z/${ids[0]}`));
    for (const bad of ['', ids[0]!, `2026-01-01T00:00:00.001Z/${ids[0]}`, '2026-01-01T00:00:00.000001Z/not-a-uuid', `2026-01-01T00:00:00.000001Z/${ids[0]}x`])
      assert.equal(form.test(bad), false, bad);
    assert.deepEqual(oldestFirstParts(`2026-01-01T00:00:00.000001Z/${ids[0]}`), { at: '2026-01-01T00:00:00.000001Z', id: ids[0] });
    for (const impossible of ['2026-02-30T00:00:00.000000Z', '2026-01-01T24:00:00.000000Z', '0000-01-01T00:00:00.000000Z'])
      assert.throws(() => oldestFirstParts(`${impossible}/${ids[0]}`), InvalidExportPosition, `${impossible} is of the form but no instant`);
  });
});
