import type { Knex } from '@tempora/kit/data';
import { Erasures } from './erasures.ts';
import { Jobs } from './jobs.ts';
import { Timepoints } from './timepoints.ts';

export type { JobLease, JobRow, OwnerErasure, TimepointRow } from './rows.ts';

/**
 * Every SQL statement of the generation service, one part per area; nothing else in the service talks to
 * PostgreSQL. Routes reach it only through the application services (src/application/); the generator
 * stores scenes and keeps its jobs through it.
 */
export class GenerationRepository {
  readonly timepoints: Timepoints;
  readonly jobs: Jobs;
  readonly erasures: Erasures;

  constructor(knex: Knex) {
    this.timepoints = new Timepoints(knex);
    this.jobs = new Jobs(knex);
    this.erasures = new Erasures(knex);
  }
}
