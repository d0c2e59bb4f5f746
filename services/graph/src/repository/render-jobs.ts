import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { ClaimedRenderJob, RenderJobRow } from './rows.ts';

/** The render jobs' lifecycle after they are queued (MomentWrites.queueRender): read, claim, finish, retry, reclaim. */
export class RenderJobs {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async byId(id: string): Promise<RenderJobRow | undefined> {
    const row = (await this.knex('render_jobs as j').join('moments as m', 'm.id', 'j.moment_id').where('j.id', id).first('j.*', 'm.path')) as
      | RenderJobRow
      | undefined;
    return row && { ...row, moment_id: Number(row.moment_id) };
  }

  /**
   * The account export: up to `limit` of the jobs `requester` asked for past `after` (from the first when
   * undefined), oldest first by the row's creation time, then its id.
   */
  async requestedBy(requester: string, after: { at: string; id: string } | undefined, limit: number): Promise<Array<RenderJobRow & { position_at: string }>> {
    const query = this.knex('render_jobs as j')
      .join('moments as m', 'm.id', 'j.moment_id')
      .where('j.requested_by', requester)
      .limit(limit)
      .select('j.*', 'm.path', positionTime(this.knex, 'j.created_at'));
    const rows = (await oldestFirst(query, ['j.created_at', 'j.id'], after && [after.at, after.id])) as Array<RenderJobRow & { position_at: string }>;
    return rows.map((row) => ({ ...row, moment_id: Number(row.moment_id) }));
  }

  /**
   * Account deletion: every job `requester` asked for, whatever its state. A renderer running one finds
   * it gone when it reports (complete, failAttempt and release match the job and its claim), so nothing
   * is written back to it. Returns how many went.
   */
  async deleteRequestedBy(requester: string): Promise<number> {
    return Number(await this.knex('render_jobs').where({ requested_by: requester }).delete());
  }

  /**
   * Marks up to `limit` due queued jobs running for `worker`, oldest first, counting the attempt. SKIP
   * LOCKED lets replicas claim at the same time without waiting on, or taking, each other's rows. A job
   * whose moment waits for the Judge (status pending) waits too: nothing is paid for that may be rejected.
   */
  async claim(worker: string, limit: number): Promise<ClaimedRenderJob[]> {
    const { rows } = (await this.knex.raw(
      `with claimed as (
         update render_jobs set status = 'running', attempts = attempts + 1, claimed_by = ?, claimed_at = now(), updated_at = now()
          where id in (select j.id from render_jobs j join moments m on m.id = j.moment_id
                        where j.status = 'queued' and j.run_after <= now() and m.status <> 'pending'
                        order by j.created_at limit ? for update of j skip locked)
         returning *)
       select c.*, m.path, m.status as moment_status, m.visibility as moment_visibility from claimed c join moments m on m.id = c.moment_id order by c.created_at`,
      [worker, limit],
    )) as { rows: ClaimedRenderJob[] };
    return rows.map((row) => ({ ...row, moment_id: Number(row.moment_id) }));
  }

  /** Records the scene on the job and its moment; false when `worker` no longer holds the job (it was reclaimed). */
  async complete(id: string, worker: string, sceneId: string): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const [row] = (await trx('render_jobs')
        .where({ id, status: 'running', claimed_by: worker })
        .update({ status: 'succeeded', scene_id: sceneId, error: null, claimed_by: null, claimed_at: null, updated_at: trx.fn.now() })
        .returning('moment_id')) as Array<{ moment_id: string }>;
      if (!row) return false;
      await trx('moments').where({ id: row.moment_id }).update({ scene_id: sceneId });
      return true;
    });
  }

  /**
   * A failed attempt: queued again after `backoffMs × 2^(attempts-1)` while attempts remain, else failed
   * for good with the error. Returns the job's new status (undefined when `worker` no longer holds it).
   */
  async failAttempt(id: string, worker: string, error: string, maxAttempts: number, backoffMs: number): Promise<'queued' | 'failed' | undefined> {
    const { rows } = (await this.knex.raw(
      `update render_jobs set status = case when attempts >= ? then 'failed' else 'queued' end,
              run_after = now() + (? * power(2, greatest(attempts - 1, 0))) * interval '1 millisecond',
              error = ?, claimed_by = null, claimed_at = null, updated_at = now()
        where id = ? and status = 'running' and claimed_by = ?
       returning status`,
      [maxAttempts, backoffMs, error.slice(0, 2000), id, worker],
    )) as { rows: Array<{ status: 'queued' | 'failed' }> };
    return rows[0]?.status;
  }

  /** Gives a job back undone (shutdown, spent budget): queued from `runAfter`, and the attempt does not count. */
  async release(id: string, worker: string, runAfter: Date): Promise<void> {
    await this.knex('render_jobs')
      .where({ id, status: 'running', claimed_by: worker })
      .update({
        status: 'queued',
        attempts: this.knex.raw('greatest(attempts - 1, 0)'),
        run_after: runAfter,
        claimed_by: null,
        claimed_at: null,
        updated_at: this.knex.fn.now(),
      });
  }

  /**
   * Jobs left running longer than `staleMs` lost their worker (it crashed or was killed): queued again,
   * or failed when that was their last attempt.
   */
  async reclaimStale(staleMs: number, maxAttempts: number): Promise<Array<{ id: string; status: string }>> {
    const { rows } = (await this.knex.raw(
      `update render_jobs set status = case when attempts >= ? then 'failed' else 'queued' end, run_after = now(),
              error = 'the worker running it stopped before finishing', claimed_by = null, claimed_at = null, updated_at = now()
        where status = 'running' and claimed_at < now() - ? * interval '1 millisecond'
       returning id, status`,
      [maxAttempts, staleMs],
    )) as { rows: Array<{ id: string; status: string }> };
    return rows;
  }
}
