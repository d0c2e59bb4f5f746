import type { AccountData } from '../application/account-data.ts';
import type { GenerationService } from '../application/generations.ts';
import type { TimepointService } from '../application/timepoints.ts';

/** What the route factories receive: the application services, and the settings the routes themselves apply. */
export interface RouteDeps {
  generations: GenerationService;
  timepoints: TimepointService;
  accountData: AccountData;
  heartbeatMs: number;
  /** SERVICE_KEY: the keys a priced operation from the gateway is signed with (requirePricedAs). */
  serviceKeys: readonly string[];
}

/**
 * Who is calling is the kit's (`gatewayCaller`, docs/reliability.md "Who gets in"): the user the gateway
 * names in X-User-ID beside its service key, or a user's own access token; a service key alone is a service
 * acting as itself, never a user.
 */
export { isServiceItself as isService, userOf } from '@tempora/kit/http';
