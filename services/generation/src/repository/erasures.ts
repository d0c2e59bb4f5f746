import { createHash } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import type { OwnerErasure } from './rows.ts';

const ownerHash = (owner: string) => createHash('sha256').update(owner).digest('hex');

/**
 * Serialises, per owner, storing a scene with erasing the owner (both in a transaction): either the scene
 * is stored first and the erasure deletes it, or the erasure comes first and the scene is refused.
 */
const lockOwner = (trx: Knex.Transaction, owner: string) => trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`generation-owner:${owner}`]);

/**
 * Whether a scene of `owner` is to be refused: their account was deleted while it was generated. Holds the
 * owner's lock until `trx` ends (lockOwner).
 */
export async function erased(trx: Knex.Transaction, owner: string): Promise<boolean> {
  await lockOwner(trx, owner);
  return Boolean(
    await trx('generation_erasures')
      .where({ owner_hash: ownerHash(owner) })
      .andWhere('until', '>', trx.fn.now())
      .first(),
  );
}

/** Account deletion: everything stored of an owner goes at once, and a marker refuses their scenes for a while. */
export class Erasures {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Account deletion: every scene (with its image), job and idempotency key of the user, and, for `holdMs`,
   * the marker by which Timepoints.insert refuses a scene of the user that was still being generated.
   * Lapsed markers of other users go in the same transaction, so the table holds live ones only.
   */
  async erase(owner: string, holdMs: number): Promise<OwnerErasure> {
    return this.knex.transaction(async (trx) => {
      await lockOwner(trx, owner);
      await trx('generation_erasures').where('until', '<=', trx.fn.now()).delete();
      await trx('generation_erasures')
        .insert({ owner_hash: ownerHash(owner), until: trx.raw(`now() + ? * interval '1 millisecond'`, [holdMs]) })
        .onConflict('owner_hash')
        .merge();
      const idempotencyKeys = Number(await trx('generation_idempotency_keys').where({ owner }).delete());
      const jobs = Number(await trx('generation_jobs').where({ owner }).delete());
      const images = Number(await trx('timepoint_images').whereIn('timepoint_id', trx('timepoints').select('id').where({ owner })).delete());
      const timepoints = Number(await trx('timepoints').where({ owner }).delete());
      return { timepoints, images, jobs, idempotency_keys: idempotencyKeys };
    });
  }
}
