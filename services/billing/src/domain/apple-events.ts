import type { JWSRenewalInfoDecodedPayload, JWSTransactionDecodedPayload } from '@apple/app-store-server-library';
import type { Catalogue } from './catalogue.ts';
import { asUserId, type Intent, type Interpretation, MalformedMessage, type SubscriptionChange } from './intents.ts';

/** The App Store Server Notifications v2 types billing acts on; every other verified one is recorded as ignored. */
export const APPLE_NOTIFICATION_TYPES = [
  'SUBSCRIBED',
  'DID_RENEW',
  'DID_FAIL_TO_RENEW',
  'GRACE_PERIOD_EXPIRED',
  'EXPIRED',
  'REFUND',
  'REVOKE',
  'DID_CHANGE_RENEWAL_STATUS',
  'TEST',
] as const;

/** Apple's price is in milliunits of the currency; ours are minor units (cents), as many as the currency has. */
export function minorUnits(milli: number | undefined, currency: string | undefined): number | null {
  if (milli === undefined || !currency) return null;
  let digits = 2;
  try {
    digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return null;
  }
  return Math.round((milli / 1000) * 10 ** digits);
}

function required(transaction: JWSTransactionDecodedPayload): { transactionId: string; originalTransactionId: string; productId: string; signedDate: number } {
  const { transactionId, originalTransactionId, productId, signedDate } = transaction;
  if (!transactionId || !originalTransactionId || !productId || signedDate === undefined) {
    throw new MalformedMessage('the signed transaction lacks transactionId, originalTransactionId, productId or signedDate');
  }
  return { transactionId, originalTransactionId, productId, signedDate };
}

/**
 * What one verified transaction means: a pack bought, or a plan's period paid (its allowance and the
 * subscription's state as of `version`); a revoked one (refunded) takes its credits back. `userId` is
 * whoever the caller established (the poster, or the notification's appAccountToken); `now` is the
 * message's own signing time, so the result does not depend on when it is processed.
 */
export function interpretTransaction(transaction: JWSTransactionDecodedPayload, catalogue: Catalogue, userId: string | null, version: number): Interpretation {
  const { transactionId, originalTransactionId, productId } = required(transaction);
  const item = catalogue.byAppleProduct(productId);
  if (!item) return { ignored: `product ${productId} is not in the catalogue` };
  if (transaction.isUpgraded) return { ignored: 'superseded by an upgrade (its successor carries the period)' };
  const intents: Intent[] = [];
  const revoked = transaction.revocationDate !== undefined;
  if (item.kind === 'plan') {
    const expired = transaction.expiresDate !== undefined && transaction.expiresDate <= version;
    intents.push(subscription(originalTransactionId, userId, item.plan.id, revoked ? 'revoked' : expired ? 'expired' : 'active', version, transaction));
  }
  intents.push({
    kind: 'purchase',
    provider: 'apple',
    ref: transactionId,
    userId,
    item: item.kind === 'pack' ? { kind: 'pack', packId: item.pack.id } : { kind: 'allowance', planId: item.plan.id, subscriptionRef: originalTransactionId },
    amount: minorUnits(transaction.price, transaction.currency),
    currency: transaction.currency?.toLowerCase() ?? null,
    paymentIntent: null,
  });
  if (revoked) intents.push({ kind: 'adjustment', provider: 'apple', ref: transactionId, paymentIntent: null, revoked: true, reason: 'refund' });
  return { userId, intents };
}

function subscription(
  ref: string,
  userId: string | null,
  planId: string | null,
  status: string,
  version: number,
  transaction: JWSTransactionDecodedPayload,
  graceUntil: Date | null = null,
  cancelAtPeriodEnd: boolean | null = null,
): SubscriptionChange {
  return {
    kind: 'subscription',
    provider: 'apple',
    ref,
    userId,
    planId,
    status,
    version,
    periodEnd: transaction.expiresDate !== undefined ? new Date(transaction.expiresDate) : null,
    cancelAtPeriodEnd,
    graceUntil,
  };
}

export interface AppleNotification {
  notificationType: string;
  subtype: string | undefined;
  signedDate: number;
  transaction: JWSTransactionDecodedPayload | undefined;
  renewal: JWSRenewalInfoDecodedPayload | undefined;
}

/** What a verified App Store Server Notification v2 means for billing. */
export function interpretNotification(notification: AppleNotification, catalogue: Catalogue): Interpretation {
  const { notificationType: type, transaction, signedDate: version } = notification;
  if (type === 'TEST') return { ignored: 'a TEST notification: the endpoint is reachable and verifies' };
  if (!(APPLE_NOTIFICATION_TYPES as readonly string[]).includes(type)) return { ignored: `notification type ${type} is not one billing acts on` };
  if (!transaction) throw new MalformedMessage(`a ${type} notification without signedTransactionInfo`);
  const ids = required(transaction);
  const userId = asUserId(transaction.appAccountToken);
  if (type === 'SUBSCRIBED' || type === 'DID_RENEW') return interpretTransaction(transaction, catalogue, userId, version);
  if (type === 'REFUND') {
    const intents: Intent[] = [];
    const item = catalogue.byAppleProduct(ids.productId);
    // A refunded current period ends the subscription; a refund of a past period only takes its credits back.
    // (The subscription comes first, as in every message: rows are always locked in one order.)
    if (item?.kind === 'plan' && (transaction.expiresDate ?? 0) > version)
      intents.push(subscription(ids.originalTransactionId, userId, item.plan.id, 'revoked', version, transaction));
    intents.push({ kind: 'adjustment', provider: 'apple', ref: ids.transactionId, paymentIntent: null, revoked: true, reason: 'refund' });
    return { userId, intents };
  }
  const item = catalogue.byAppleProduct(ids.productId);
  if (item?.kind !== 'plan') return { ignored: `${type} about product ${ids.productId}, which is not a plan in the catalogue` };
  const planId = item.plan.id;
  switch (type) {
    case 'DID_FAIL_TO_RENEW': {
      const grace = notification.renewal?.gracePeriodExpiresDate;
      return { userId, intents: [subscription(ids.originalTransactionId, userId, planId, 'past_due', version, transaction, grace ? new Date(grace) : null)] };
    }
    case 'GRACE_PERIOD_EXPIRED':
    case 'EXPIRED':
      return { userId, intents: [subscription(ids.originalTransactionId, userId, planId, 'expired', version, transaction)] };
    case 'REVOKE':
      return { userId, intents: [subscription(ids.originalTransactionId, userId, planId, 'revoked', version, transaction)] };
    default: {
      // DID_CHANGE_RENEWAL_STATUS: the period runs on; only whether it renews changes.
      const running = (transaction.expiresDate ?? 0) > version;
      return {
        userId,
        intents: [
          subscription(
            ids.originalTransactionId,
            userId,
            planId,
            running ? 'active' : 'expired',
            version,
            transaction,
            null,
            notification.subtype === 'AUTO_RENEW_DISABLED',
          ),
        ],
      };
    }
  }
}
