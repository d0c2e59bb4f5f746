import type { Knex } from '@tempora/kit/data';
import { type MomentRow, normaliseMoment, prefixed } from './rows.ts';

/** The claims of the expander's descriptions, apart from its expansions, so a moment described is not held from being expanded. */
export const DESCRIBE_CLAIM = 'expander:describe';

/**
 * The judge's and the expander's work: the moments waiting for them and the claims (`worker_claims`) by
 * which their replicas share it.
 */
export class WorkerClaims {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Pending moments no judge holds, longest waiting first. */
  async pendingMoments(limit: number): Promise<MomentRow[]> {
    const rows = (await this.unclaimed('judge')
      .where({ 'm.status': 'pending' })
      .orderBy([{ column: 'm.updated_at' }, { column: 'm.id' }])
      .limit(limit)
      .select(prefixed('m'))) as MomentRow[];
    return rows.map(normaliseMoment);
  }

  /**
   * Public, active moments with their metadata (layer 1 or 2) never expanded, that no expander holds, with
   * fewer than `maxCurated` curated edges.
   */
  async underConnectedMoments(limit: number, maxCurated: number): Promise<MomentRow[]> {
    const rows = (await this.unclaimed('expander')
      .where({ 'm.visibility': 'public', 'm.status': 'active' })
      .andWhere('m.layer', '>=', 1)
      .whereNull('m.expanded_at')
      .andWhereRaw(`(select count(*) from edges e where (e.source_id = m.id or e.target_id = m.id) and e.origin <> 'auto') < ?`, [maxCurated])
      .orderBy('m.id')
      .limit(limit)
      .select(prefixed('m'))) as MomentRow[];
    return rows.map(normaliseMoment);
  }

  /**
   * Bare moments (layer 0: a path and a name) that no one is rendering and no expander holds, oldest
   * first: the expander writes their metadata (layer 1). Rejected (archived) and private ones are left alone.
   */
  async bareMoments(limit: number): Promise<MomentRow[]> {
    const rows = (await this.unclaimed(DESCRIBE_CLAIM)
      .where({ 'm.layer': 0, 'm.visibility': 'public' })
      .whereNot('m.status', 'archived')
      .whereNotExists(this.knex('render_jobs as j').whereRaw('j.moment_id = m.id').whereIn('j.status', ['queued', 'running']).select(this.knex.raw('1')))
      .orderBy('m.id')
      .limit(limit)
      .select(prefixed('m'))) as MomentRow[];
    return rows.map(normaliseMoment);
  }

  /**
   * Claims `moments` (as the caller read them) for `role` for `seconds`: those still at the version read
   * (`updated_at`, to the millisecond a JavaScript Date keeps) that no live claim of the role holds at that
   * version. Returns the ids claimed. Two replicas claiming one moment at once: the second waits for the
   * first's insert and gets none. A replica that read a moment before another wrote it gets none either, so
   * no worker writes back a stale read. A claim is kept after the work succeeds, until it lapses; it binds
   * only the version claimed, so a moment written again (a writer's new proposal) is a candidate at once.
   */
  async claim(role: string, moments: ReadonlyArray<Pick<MomentRow, 'id' | 'updated_at'>>, seconds: number): Promise<Set<number>> {
    if (moments.length === 0) return new Set();
    const ids = moments.map((moment) => moment.id);
    const seen = moments.map((moment) => new Date(moment.updated_at).toISOString());
    // Lapsed claims on other moments are cleared by the same statement, so the table holds live claims only.
    const { rows } = (await this.knex.raw(
      `with lapsed as (delete from worker_claims where role = ? and until <= now() and moment_id <> all(?::bigint[]))
       insert into worker_claims (role, moment_id, until, version)
       select ?, m.id, now() + make_interval(secs => ?), m.updated_at
         from unnest(?::bigint[], ?::timestamptz[]) as k(id, seen) join moments m on m.id = k.id
        where date_trunc('milliseconds', m.updated_at) = k.seen
       on conflict (role, moment_id) do update set until = excluded.until, version = excluded.version
        where worker_claims.until <= now() or worker_claims.version is distinct from excluded.version
       returning moment_id`,
      [role, ids, role, seconds, ids, seen],
    )) as { rows: Array<{ moment_id: string }> };
    return new Set(rows.map((row) => Number(row.moment_id)));
  }

  /** Gives up claims whose work failed, so that any replica may try again at once. */
  async release(role: string, ids: readonly number[]): Promise<void> {
    if (ids.length > 0)
      await this.knex('worker_claims')
        .where({ role })
        .whereIn('moment_id', ids as number[])
        .delete();
  }

  async markExpanded(ids: readonly number[]): Promise<void> {
    if (ids.length > 0)
      await this.knex('moments')
        .whereIn('id', ids as number[])
        .update({ expanded_at: this.knex.fn.now() });
  }

  /** Moments no live claim of `role` holds at their current version. */
  private unclaimed(role: string): Knex.QueryBuilder {
    return this.knex('moments as m').whereNotExists(
      this.knex('worker_claims as c')
        .whereRaw('c.moment_id = m.id')
        .andWhere('c.role', role)
        .andWhereRaw('c.until > now()')
        .andWhereRaw('c.version is not distinct from m.updated_at')
        .select(this.knex.raw('1')),
    );
  }
}
