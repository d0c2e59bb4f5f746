import { keysetPage, oldestFirstParts, oldestFirstPosition } from '@tempora/kit/http';
import type { Generator } from '../generator.ts';
import type { GenerationRepository, OwnerErasure } from '../repository/index.ts';
import { jobView } from '../views.ts';

/**
 * The account-data contract (services/kit/src/http/account-data.ts) for generation, without Koa: deleting
 * everything of a user, their generations still running stopped, and exporting it page by page.
 */
export class AccountData {
  private readonly generator: Generator;
  private readonly repository: GenerationRepository;

  constructor(generator: Generator, repository: GenerationRepository) {
    this.generator = generator;
    this.repository = repository;
  }

  erase(owner: string): Promise<OwnerErasure> {
    return this.generator.eraseOwner(owner);
  }

  /** A page of the owner's scene records past `after`, oldest first (then by id): the records as stored. */
  async timepoints(owner: string, after: string, limit: number) {
    const rows = await this.repository.timepoints.exportOf(owner, oldestFirstParts(after), limit + 1);
    return keysetPage(
      rows,
      limit,
      (row) => oldestFirstPosition(row.position_at, row.id),
      (row) => row.record,
    );
  }

  /** A page of the owner's jobs past `after`, oldest first (then by id), with the request as sent and its Idempotency-Key. */
  async jobs(owner: string, after: string, limit: number) {
    return keysetPage(
      await this.repository.jobs.exportOf(owner, oldestFirstParts(after), limit + 1),
      limit,
      (job) => oldestFirstPosition(job.position_at, job.id),
      (job) => ({ ...jobView(job), request: job.request, idempotency_key: job.idempotency_key }),
    );
  }
}
