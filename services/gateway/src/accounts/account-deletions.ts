import type { AccountDeletion } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { DeletionRow, DeletionStepRow, GatewayRepository } from '../repository/index.ts';
import { ACCOUNT_SERVICES, AccountServiceError, type AccountServices } from './account-services.ts';

export interface DeletionSettings {
  /** ACCOUNT_DELETION_RETRY_MS: a failed step is tried again after this, then twice as long each time, up to an hour. */
  retryMs: number;
  /** How often a replica looks for due steps. */
  sweepMs: number;
}

const MAX_RETRY_MS = 3_600_000;
/** How long a replica holds a step it is running; another takes it up after that if this one stopped. */
const LEASE_MS = 120_000;
const BATCH = 20;

export type ServicePart = ({ status: 'deleted' } & AccountDeletion) | { status: 'pending'; attempts: number; error: string | null };

/** What the user is told: what was deleted where, and what is still to be deleted. */
export interface DeletionReport {
  user_id: string;
  status: 'completed' | 'pending';
  requested_at: string;
  completed_at: string | null;
  services: Record<string, ServicePart>;
}

function report(deletion: DeletionRow, steps: readonly DeletionStepRow[]): DeletionReport {
  const services: Record<string, ServicePart> = { gateway: { status: 'deleted', service: 'gateway', deleted: deletion.gateway, kept: {}, notes: [] } };
  for (const step of steps) {
    services[step.service] = step.result ? { status: 'deleted', ...step.result } : { status: 'pending', attempts: step.attempts, error: step.last_error };
  }
  return {
    user_id: deletion.user_id,
    status: deletion.completed_at ? 'completed' : 'pending',
    requested_at: new Date(deletion.requested_at).toISOString(),
    completed_at: deletion.completed_at ? new Date(deletion.completed_at).toISOString() : null,
    services,
  };
}

/**
 * Deleting an account everywhere, exactly once, even when a service is down: the gateway records the
 * deletion and removes its own rows (so every credential stops working) in one transaction, then asks each
 * service holding the user's data to delete it. A service that cannot answer keeps its step pending; every
 * replica's sweep retries due steps until each service confirms (the services' deletions are idempotent,
 * so a retry after an unanswered success is harmless).
 */
export class AccountDeletions {
  private readonly repository: GatewayRepository['deletions'];
  private readonly services: AccountServices;
  private readonly settings: DeletionSettings;
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(repository: GatewayRepository['deletions'], services: AccountServices, settings: DeletionSettings, logger: Logger) {
    this.repository = repository;
    this.services = services;
    this.settings = settings;
    this.logger = logger;
  }

  /**
   * Deletes the account (or reports the deletion already under way) and tries every pending step at once.
   * Undefined when there is no such account and no deletion of it on record.
   */
  async delete(userId: string, requestId: string): Promise<DeletionReport | undefined> {
    const recorded = await this.repository.record(userId, ACCOUNT_SERVICES);
    if (!recorded) return undefined;
    await Promise.all((await this.repository.claimDue(ACCOUNT_SERVICES.length, LEASE_MS, userId)).map((step) => this.run(step, requestId)));
    const found = await this.repository.find(userId);
    return found && report(found.deletion, found.steps);
  }

  start(): void {
    const tick = () => {
      this.sweeping = this.sweep()
        .catch((error: unknown) => this.logger.error({ err: error }, 'account deletion sweep failed'))
        .finally(() => {
          this.sweeping = undefined;
          if (this.timer) this.timer = setTimeout(tick, this.settings.sweepMs).unref();
        });
    };
    this.timer = setTimeout(tick, this.settings.sweepMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** Runs the steps due now (every replica; steps are claimed, so each runs on one at a time). */
  async sweep(): Promise<void> {
    for (;;) {
      const steps = await this.repository.claimDue(BATCH, LEASE_MS);
      if (steps.length === 0) return;
      await Promise.all(steps.map((step) => this.run(step, `account-deletion-${step.user_id}`)));
      if (steps.length < BATCH) return;
    }
  }

  private async run(step: DeletionStepRow, requestId: string): Promise<void> {
    const service = step.service as (typeof ACCOUNT_SERVICES)[number];
    try {
      const result = await this.services.delete(service, step.user_id, requestId);
      await this.repository.complete(step.user_id, service, result);
    } catch (error) {
      const message = error instanceof AccountServiceError ? error.message : `the ${service} service's part failed`;
      if (!(error instanceof AccountServiceError)) this.logger.error({ err: error, service }, 'account deletion step failed');
      const retryMs = Math.min(this.settings.retryMs * 2 ** Math.max(0, step.attempts - 1), MAX_RETRY_MS);
      await this.repository.postpone(step.user_id, service, message, retryMs);
      this.logger.warn({ service, user: step.user_id, attempts: step.attempts, retryMs, reason: message }, 'account deletion step postponed');
    }
  }
}
