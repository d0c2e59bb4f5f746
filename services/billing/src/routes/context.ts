import { Problem, type RouteDefinition, unauthorized } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Context } from 'koa';
import type { AccountData } from '../account-data.ts';
import type { AppleChannel } from '../apple-channel.ts';
import type { Book } from '../book.ts';
import type { BillingConfig } from '../config.ts';
import type { Catalogue } from '../domain/catalogue.ts';
import type { BillingMetrics } from '../metrics.ts';
import type { Outbox } from '../outbox.ts';
import type { BillingRepository } from '../repository.ts';
import type { StripeChannel } from '../stripe-channel.ts';

declare module '@tempora/kit/http' {
  interface RequestState {
    /** A webhook's body exactly as it arrived: the signature covers these bytes. */
    rawBody?: Buffer;
  }
}

export interface BillingRouteDeps {
  config: BillingConfig;
  catalogue: Catalogue;
  repository: BillingRepository;
  book: Book;
  outbox: Outbox;
  accountData: AccountData;
  stripe: StripeChannel;
  apple: AppleChannel;
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
