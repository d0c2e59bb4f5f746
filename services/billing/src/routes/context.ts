import { Problem, type RouteDefinition, unauthorized } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Context } from 'koa';
import type { AccountData } from '../application/account-data.ts';
import type { ChannelService } from '../application/channels.ts';
import type { OperatorService } from '../application/operators.ts';
import type { SubscriptionService } from '../application/subscriptions.ts';
import type { Catalogue } from '../domain/catalogue.ts';
import type { BillingMetrics } from '../metrics.ts';
import { Refusal } from '../refusal.ts';

declare module '@tempora/kit/http' {
  interface RequestState {
    /** A webhook's body exactly as it arrived: the signature covers these bytes. */
    rawBody?: Buffer;
  }
}

/** Which payment channels are configured: a channel's routes are mounted only when it is. */
export interface ConfiguredChannels {
  /** Stripe Checkout (STRIPE_SECRET_KEY). */
  checkout: boolean;
  /** Stripe's webhooks (STRIPE_WEBHOOK_SECRET). */
  stripeWebhooks: boolean;
  /** The App Store (APPLE_ROOT_CERTIFICATES, APPLE_BUNDLE_ID). */
  apple: boolean;
}

/** What the route factories receive: the application services, and what a refusal is counted and logged with. */
export interface BillingRouteDeps {
  catalogue: Catalogue;
  subscriptions: SubscriptionService;
  channels: ChannelService;
  operators: OperatorService;
  accountData: AccountData;
  configured: ConfiguredChannels;
  metrics: BillingMetrics;
  logger: Logger;
}

/** Security schemes (the kit's authenticators'). */
export const SERVICE = 'ServiceKey';
export const ADMIN = 'AdminKey';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The end user the gateway forwards (X-User-ID beside its service key): billing trusts the header only
 * with a valid service key, which the route's security has checked.
 */
export function callerId(ctx: Context): string {
  const value = ctx.get('X-User-ID');
  if (!value) throw unauthorized("this operation is a user's: send X-User-ID (the gateway sets it)", 'ApiKey header="X-User-ID"');
  if (!UUID.test(value)) throw new Problem(400, 'X-User-ID must be a user id (a UUID)');
  return value.toLowerCase();
}

/** Operator routes answer services and admins, never a user's request forwarded by the gateway. */
export function refuseUsers(ctx: Context): void {
  if (ctx.get('X-User-ID')) throw new Problem(403, 'an operator operation: not available to users');
}

/**
 * A channel's route, mounted only when the channel is configured: an unconfigured one answers 404 and is
 * absent from the OpenAPI document, as a path this service does not serve. It is never a 5xx: nothing
 * on our side failed, and no retry by the caller or provider would change the answer.
 */
export const whenConfigured = (configured: boolean, route: RouteDefinition): RouteDefinition[] => (configured ? [route] : []);

/**
 * Runs a channel's work; a Refusal (unverifiable input) is counted, logged (its reason, our words and
 * `context`, never the payload) and answered 400 with its reason.
 */
export async function refusing<T>(deps: BillingRouteDeps, channel: string, context: Record<string, unknown>, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!(error instanceof Refusal)) throw error;
    deps.metrics.refusals.inc({ channel, reason: error.reason });
    deps.logger.warn({ channel, reason: error.reason, detail: error.message, ...context }, 'refused');
    throw new Problem(400, error.message, { extensions: { reason: error.reason } });
  }
}
