import type { Knex } from '@tempora/kit/data';
import { AdjacencyReads } from './adjacency.ts';
import { WorkerClaims } from './claims.ts';
import { GraphMeta } from './graph-meta.ts';
import { MomentLists } from './lists.ts';
import { MomentReads } from './moments.ts';
import { RenderJobs } from './render-jobs.ts';
import { WorkerSpend } from './spend.ts';
import { MomentWrites } from './writes.ts';

export type { AdjacencyChange } from './adjacency.ts';
export { type MomentFilters, type MomentPage, SORTS, type SortKey } from './lists.ts';
export { type ClaimedRenderJob, type EdgeRow, type MomentRow, NODE_COLUMNS, type RenderJobRow } from './rows.ts';
export { MissingTargetError } from './writes.ts';

/**
 * Every SQL statement of the graph service, one part per area. Nothing else in the service talks to
 * PostgreSQL (the change feed's LISTEN/NOTIFY aside). Routes reach it only through GraphService; the
 * background workers use the parts that are theirs (render jobs, spend, claims).
 */
export class GraphRepository {
  readonly writes: MomentWrites;
  readonly moments: MomentReads;
  readonly lists: MomentLists;
  readonly adjacency: AdjacencyReads;
  readonly renderJobs: RenderJobs;
  readonly spend: WorkerSpend;
  readonly claims: WorkerClaims;
  readonly meta: GraphMeta;

  constructor(knex: Knex) {
    this.writes = new MomentWrites(knex);
    this.moments = new MomentReads(knex);
    this.lists = new MomentLists(knex);
    this.adjacency = new AdjacencyReads(knex);
    this.renderJobs = new RenderJobs(knex);
    this.spend = new WorkerSpend(knex);
    this.claims = new WorkerClaims(knex);
    this.meta = new GraphMeta(knex);
  }
}
