import {
  type AccountDeletion,
  type AccountExportPage,
  type ExportPosition,
  exportPage,
  keysetPage,
  oldestFirstAfter,
  oldestFirstParts,
  oldestFirstPosition,
} from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Catalogue } from '../domain/catalogue.ts';
import { appleRenewsNote, chargeableAtStripe, PAYMENT_RETENTION, renewsAtApple, stripeCancelledNote } from '../domain/erasure.ts';
import { asUserId } from '../domain/intents.ts';
import type { BillingRepository, ProviderRef, SubscriptionRow } from '../repository/index.ts';
import type { StripeChannel } from '../stripe-channel.ts';
import { historyView, paymentExportView, subscriptionView } from '../views.ts';

const SERVICE = 'billing';
/** What a deletion removes, by kind (payments are kept, anonymised). */
const DELETED_KINDS = ['subscriptions', 'accounts', 'outbox', 'history', 'events'] as const;

/**
 * A payment's or subscription's position oldest first: its time, then `provider:ref` (providers hold no colon),
 * the order the repository pages them in.
 */
const keyOf = (row: ProviderRef & { position_at: string }) => oldestFirstPosition(row.position_at, `${row.provider}:${row.ref}`);
/**
 * Such a position: the time, a slash, a provider, a colon, the provider's ref; printable ASCII, as Stripe's
 * and Apple's ids are (a NUL, which PostgreSQL's text refuses, is not one of them).
 */
const KEY_POSITION = oldestFirstAfter(/[!-9;-~]+:[ -~]*/);
function afterKey(after: string): (ProviderRef & { at: string }) | undefined {
  const parts = oldestFirstParts(after);
  if (!parts) return undefined;
  const colon = parts.id.indexOf(':');
  return { at: parts.at, provider: parts.id.slice(0, colon), ref: parts.id.slice(colon + 1) };
}
/** A history entry's position oldest first: its time, then its id (a bigint). */
const HISTORY_POSITION = oldestFirstAfter(/\d{1,18}/);

/**
 * The account-data contract (services/kit/src/http/account-data.ts) for billing: deleting a user's
 * billing data, their paid plans cancelled at Stripe first, and exporting it page by page.
 */
export class AccountData {
  private readonly repository: BillingRepository;
  private readonly stripe: StripeChannel;
  private readonly catalogue: Catalogue;
  private readonly graceMs: number;
  private readonly logger: Logger;

  constructor(repository: BillingRepository, stripe: StripeChannel, catalogue: Catalogue, graceMs: number, logger: Logger) {
    this.repository = repository;
    this.stripe = stripe;
    this.catalogue = catalogue;
    this.graceMs = graceMs;
    this.logger = logger;
  }

  /**
   * Deletes the user's billing data. First the account is marked deleted, so a message about it applied
   * from then on changes nothing (and no subscription of theirs appears that the next step would miss);
   * then each subscription Stripe could still charge is cancelled at Stripe; then, in one transaction,
   * the rows go and the payments lose their link to the user. A Stripe failure throws a StripeFailure
   * with nothing deleted: the gateway calls again, and each step is done or found done.
   */
  async erase(id: string): Promise<AccountDeletion> {
    const userId = asUserId(id);
    const zeros = Object.fromEntries(DELETED_KINDS.map((kind) => [kind, 0]));
    // Billing's users are the gateway's UUIDs: it holds nothing for any other id.
    if (!userId) return { service: SERVICE, deleted: zeros, kept: { payments: { count: 0, reason: PAYMENT_RETENTION } }, notes: [] };
    await this.repository.erasures.markErased(userId);
    const subscriptions = await this.repository.subscriptions.of(userId);
    const notes: string[] = [];
    for (const row of subscriptions.filter(chargeableAtStripe)) {
      const cancelled = await this.stripe.cancelNow(row.ref);
      this.logger.info({ user: userId, subscription: row.ref, cancelled }, 'account deleted: Stripe subscription ended');
      notes.push(stripeCancelledNote(this.planName(row)));
    }
    for (const row of subscriptions.filter(renewsAtApple)) notes.push(appleRenewsNote(this.planName(row)));
    const erased = await this.repository.erasures.erase(userId, notes);
    this.logger.info({ user: userId, deleted: erased.counts, anonymised: erased.anonymised }, 'account deleted');
    return {
      service: SERVICE,
      deleted: { ...zeros, ...erased.counts },
      kept: { payments: { count: erased.anonymised, reason: PAYMENT_RETENTION } },
      notes: erased.notes,
    };
  }

  /**
   * One page of the user's billing data: payments, then subscriptions, then the history, each oldest first
   * (docs/accounts.md, "Export"). A cursor past the last kind is an empty, final page; one at a position
   * this export never hands out throws the kit's InvalidExportPosition.
   */
  async exportPage(id: string, position: ExportPosition, limit: number): Promise<AccountExportPage> {
    const userId = asUserId(id);
    return exportPage(
      SERVICE,
      [
        {
          kind: 'payments',
          after: KEY_POSITION,
          read: async (after, count) =>
            keysetPage(userId ? await this.repository.payments.after(userId, afterKey(after), count + 1) : [], count, keyOf, paymentExportView),
        },
        {
          kind: 'subscriptions',
          after: KEY_POSITION,
          read: async (after, count) =>
            keysetPage(userId ? await this.repository.subscriptions.after(userId, afterKey(after), count + 1) : [], count, keyOf, (row: SubscriptionRow) => ({
              ...subscriptionView(row, this.graceMs),
              created_at: row.created_at.toISOString(),
            })),
        },
        {
          kind: 'history',
          after: HISTORY_POSITION,
          read: async (after, count) =>
            keysetPage(
              userId ? await this.repository.history.after(userId, oldestFirstParts(after), count + 1) : [],
              count,
              (row) => oldestFirstPosition(row.position_at, String(row.id)),
              historyView,
            ),
        },
      ],
      position,
      limit,
    );
  }

  private planName(row: SubscriptionRow): string {
    return (row.plan_id && this.catalogue.plan(row.plan_id)?.name) ?? row.plan_id ?? 'paid';
  }
}
