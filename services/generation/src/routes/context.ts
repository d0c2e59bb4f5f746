import type { Generator } from '../generator.ts';
import type { ProviderSet } from '../providers.ts';
import type { GenerationRepository } from '../repository.ts';

export interface RouteDeps {
  generator: Generator;
  repository: GenerationRepository;
  version: string;
  heartbeatMs: number;
  providers: ProviderSet;
  permissiveTextModel: string;
  /** SERVICE_KEY: the keys a priced operation from the gateway is signed with (requirePricedAs). */
  serviceKeys: readonly string[];
}

/**
 * Who is calling is the kit's (`gatewayCaller`, docs/reliability.md "Who gets in"): the user the gateway
 * names in X-User-ID beside its service key, or a user's own access token; a service key alone is a service
 * acting as itself, never a user.
 */
export { isServiceItself as isService, userOf } from '@tempora/kit/http';
