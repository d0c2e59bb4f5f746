import { Problem } from '@tempora/kit/http';
import type { Context } from 'koa';
import type { AccountsService } from '../accounts-service.ts';
import type { AuthService } from '../auth-service.ts';
import type { GatewayConfig } from '../config.ts';
import type { UserPrincipal } from '../credentials.ts';
import type { LedgerService } from '../ledger-service.ts';
import type { Proxy } from '../proxy/proxy.ts';

/** What the routes call: one application service per area, and the proxy for the routes that forward. */
export interface GatewayRouteDeps {
  config: GatewayConfig;
  auth: AuthService;
  accounts: AccountsService;
  ledger: LedgerService;
  proxy: Proxy;
}

/** The signed-in user (the route's security guarantees one). */
export function currentUser(ctx: Context): UserPrincipal {
  const { user } = ctx.state;
  if (!user) throw new Problem(403, 'this operation needs a signed-in user');
  return user;
}
