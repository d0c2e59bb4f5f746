import type { Knex } from '@tempora/kit/data';
import { DeletionsRepository } from './account-deletions.ts';
import { ApiKeys } from './api-keys.ts';
import { ChargedJobRows } from './charged-jobs.ts';
import { Ledger } from './ledger.ts';
import { OpenCharges } from './open-charges.ts';
import { Sessions } from './sessions.ts';
import { Users } from './users.ts';

export type { DeletionRow, DeletionStepRow } from './account-deletions.ts';
export type { ApiKeyRow } from './api-keys.ts';
export type { ChargedJobRow, ChargedJobRows, ChargeStanding } from './charged-jobs.ts';
export { IdempotencyConflict, InsufficientCredits, type LedgerOutcome, type LedgerRow, UnknownUser } from './ledger.ts';
export type { RefreshTokenRow } from './sessions.ts';
export type { IdentityRow, UserRow } from './users.ts';

/**
 * Every SQL statement of the gateway, one part per area. Nothing else in the service talks to PostgreSQL.
 * Statements of one transaction that cross areas share a function rather than a part (a new user's signup
 * grant is the ledger's `applyGrant`; a refund and a followed job close the charge with `closeCharge`).
 */
export class GatewayRepository {
  readonly users: Users;
  readonly sessions: Sessions;
  readonly apiKeys: ApiKeys;
  readonly ledger: Ledger;
  readonly openCharges: OpenCharges;
  readonly chargedJobs: ChargedJobRows;
  readonly deletions: DeletionsRepository;

  constructor(knex: Knex) {
    this.users = new Users(knex);
    this.sessions = new Sessions(knex);
    this.apiKeys = new ApiKeys(knex);
    this.ledger = new Ledger(knex);
    this.openCharges = new OpenCharges(knex);
    this.chargedJobs = new ChargedJobRows(knex);
    this.deletions = new DeletionsRepository(knex);
  }
}
