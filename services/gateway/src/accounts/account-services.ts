import {
  ACCOUNT_DATA_PATH,
  type AccountDeletion,
  AccountDeletionSchema,
  type AccountExportPage,
  AccountExportPageSchema,
  ServiceClient,
  type ServiceReply,
  UnexpectedAnswer,
} from '@tempora/kit/http';
import type { z } from 'zod';
import type { UpstreamTarget } from '../proxy/routing.ts';

/** Every service that holds a user's data besides the gateway, in the order an export lists them. */
export const ACCOUNT_SERVICES = ['generation', 'graph', 'simulation', 'conductor', 'billing'] as const;
export type AccountService = (typeof ACCOUNT_SERVICES)[number];

/** A service that could not answer, or answered something other than the contract: the step stays pending. */
export class AccountServiceError extends Error {}

/**
 * The gateway's side of the account-data contract (services/kit/src/http/account-data.ts): each answer
 * is parsed with the schema the service documents its route with, so an answer that is not the contract
 * is an error, never a silent "nothing there".
 */
export class AccountServices {
  private readonly clients: Map<AccountService, ServiceClient>;

  constructor(upstreams: Record<AccountService, UpstreamTarget>, timeoutMs: number) {
    this.clients = new Map(
      ACCOUNT_SERVICES.map((name) => [name, new ServiceClient(upstreams[name].url, upstreams[name].serviceKey, timeoutMs, `the ${name} service`)]),
    );
  }

  async delete(service: AccountService, userId: string, requestId: string): Promise<AccountDeletion> {
    return this.parsed(service, AccountDeletionSchema, await this.call(service, 'DELETE', ACCOUNT_DATA_PATH(userId), requestId));
  }

  async exportPage(service: AccountService, userId: string, cursor: string | undefined, requestId: string): Promise<AccountExportPage> {
    const query = cursor === undefined ? '' : `?cursor=${encodeURIComponent(cursor)}`;
    return this.parsed(service, AccountExportPageSchema, await this.call(service, 'GET', `${ACCOUNT_DATA_PATH(userId)}${query}`, requestId));
  }

  private async call(service: AccountService, method: 'GET' | 'DELETE', path: string, requestId: string): Promise<ServiceReply> {
    try {
      return await this.clients.get(service)!.call(method, path, { requestId });
    } catch (error) {
      throw new AccountServiceError(`the ${service} service could not be reached (${(error as Error).message})`);
    }
  }

  private parsed<S extends z.ZodType>(service: AccountService, schema: S, reply: ServiceReply): z.output<S> {
    if (reply.status !== 200) throw new AccountServiceError(`the ${service} service answered ${reply.status}`);
    try {
      return reply.json(schema);
    } catch (error) {
      if (error instanceof UnexpectedAnswer)
        throw new AccountServiceError(`the ${service} service answered outside the account-data contract: ${error.mismatch}`);
      throw error;
    }
  }
}
