import { Problem, type RateLimiter } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Context } from 'koa';
import type { AccountDeletions } from '../accounts/account-deletions.ts';
import type { AccountServices } from '../accounts/account-services.ts';
import type { AuthCache } from '../auth-cache.ts';
import type { ChargedJobs } from '../charged-jobs.ts';
import type { GatewayConfig } from '../config.ts';
import type { UserPrincipal } from '../credentials.ts';
import type { Credits } from '../domain/credits.ts';
import type { KeyStore } from '../domain/keys.ts';
import type { GitHubSignIn, OidcVerifier } from '../domain/providers.ts';
import type { TokenService } from '../domain/tokens.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { Proxy } from '../proxy/proxy.ts';
import type { GatewayRepository } from '../repository.ts';

export interface GatewayRouteDeps {
  /** Cleared after every change to who may authenticate as what. */
  authCache: AuthCache;
  config: GatewayConfig;
  repository: GatewayRepository;
  tokens: TokenService;
  keys: KeyStore;
  apple: OidcVerifier;
  google: OidcVerifier;
  github: GitHubSignIn;
  credits: Credits;
  limiter: RateLimiter;
  metrics: GatewayMetrics;
  /** Each service's side of account deletion and export. */
  accountServices: AccountServices;
  deletions: AccountDeletions;
  /** The charged jobs the gateway follows until they end. */
  jobs: ChargedJobs;
  logger: Logger;
  proxy: Proxy;
}

/** The signed-in user (the route's security guarantees one). */
export function currentUser(ctx: Context): UserPrincipal {
  const { user } = ctx.state;
  if (!user) throw new Problem(403, 'this operation needs a signed-in user');
  return user;
}
