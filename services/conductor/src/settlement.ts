import type { Logger } from '@tempora/kit/observability';
import type { GatewayClient } from './clients/gateway.ts';
import { chargeKey } from './domain/charging.ts';
import type { ConductorRepository } from './repository.ts';

interface SettlementDeps {
  repository: ConductorRepository;
  gateway: GatewayClient;
  logger: Logger;
  /** A call left `charging` this long belongs to a process that stopped. */
  staleMs: number;
}

/** What a request leaves to settle after it answered: refunds not booked yet, interrupted calls, the jobs paid calls started. */
export class Settlement {
  private readonly deps: SettlementDeps;

  constructor(deps: SettlementDeps) {
    this.deps = deps;
  }

  /**
   * Settles what a failure left: refunds not booked when a tool failed, and calls whose process stopped
   * between their charge and their end (refunded: their result was never delivered). Returns how many
   * calls it settled.
   */
  async settleUnsettled(requestId: string): Promise<number> {
    const rows = await this.deps.repository.unsettledCalls(new Date(Date.now() - this.deps.staleMs));
    let settled = await this.settleJobs(requestId);
    for (const row of rows) {
      const key = row.idempotency_key ?? chargeKey(row.message_id, row.index);
      try {
        const refunded = await this.deps.gateway.refund(
          row.user_id,
          key,
          row.status === 'charging' ? 'the conductor stopped before the call ended' : 'refund of a failed call, booked late',
          requestId,
        );
        const note =
          row.status === 'charging'
            ? `interrupted before it ended; ${refunded ? 'refunded' : 'never charged'}`
            : `${row.note.replace(/; the refund of \d+ credits is pending$/, '')}; refunded later`;
        await this.deps.repository.settleCall(row.message_id, row.index, { status: 'failed', credits: 0, note, refund_pending: false });
        settled += 1;
      } catch (error) {
        this.deps.logger.warn({ err: error, message: row.message_id, index: row.index }, 'refund still not booked');
      }
    }
    return settled;
  }

  /**
   * The jobs paid calls started (simulation runs): hands the gateway those it has not taken yet, and
   * writes into the journal how the gateway settled those it followed, so a conversation shows a run
   * that failed later, or was cancelled before a step, as refunded, as the ledger has it. Returns how many
   * calls it settled.
   */
  private async settleJobs(requestId: string): Promise<number> {
    const { repository, gateway, logger } = this.deps;
    let settled = 0;
    for (const row of await repository.unsettledJobs()) {
      const key = row.idempotency_key ?? chargeKey(row.message_id, row.index);
      try {
        if (row.job_state === 'to_follow') {
          const followed = row.job ? await gateway.follow(row.user_id, key, row.job, requestId) : false;
          await repository.settleCall(row.message_id, row.index, { job_state: followed ? 'following' : 'settled' });
          continue;
        }
        const standing = await gateway.standing(row.user_id, key, requestId);
        if (standing?.state === 'following') {
          // Looked at: the others take their turn before this one again.
          await repository.settleCall(row.message_id, row.index, {});
          continue;
        }
        if (standing?.state === 'refunded') {
          const note = `${row.note}; then ${standing.reason ?? 'it delivered nothing'}: refunded ${standing.refunded} credits`;
          await repository.settleCall(row.message_id, row.index, {
            status: 'failed',
            credits: Math.max(0, standing.charged - standing.refunded),
            note,
            job_state: 'settled',
          });
        } else await repository.settleCall(row.message_id, row.index, { job_state: 'settled' });
        settled += 1;
      } catch (error) {
        logger.warn({ err: error, message: row.message_id, index: row.index }, 'the settlement of a job could not be read');
      }
    }
    return settled;
  }
}
