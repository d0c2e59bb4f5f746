import type { Logger } from '@tempora/kit/observability';
import type { GatewayRepository, UserRow } from '../repository/index.ts';
import { apiKeyView, identityView, ledgerView, sessionView, userView } from '../views.ts';
import { ACCOUNT_SERVICES, AccountServiceError, type AccountServices } from './account-services.ts';

const LEDGER_PAGE = 1000;
/** Pages asked of one service before its export is declared endless (a cursor that never ends). */
const MAX_PAGES_PER_SERVICE = 100_000;

export const EXPORT_FORMAT = 'tempora-user-export';
export const EXPORT_VERSION = 2;

const json = (value: unknown) => JSON.stringify(value);
/** What `errors` says of each service not (fully) exported because the account's deletion committed meanwhile. */
const ACCOUNT_GONE = 'not exported: the account was deleted during the export';

/** The account's deletion committed while its export ran: the services are deleting their part too. */
class AccountGone extends Error {}

/**
 * The user's whole data as one JSON document (docs/accounts.md), streamed: the gateway's rows, the ledger a
 * page at a time, then each service's pages by kind as they come, each kind oldest first as the service
 * pages it (the account-data contract, services/kit/src/http/account-data.ts). Nothing is held whole in
 * memory and nothing is cut short: a service that fails midway has its part closed where it stopped, named
 * in `errors`, and the document ends with `"complete": false`. Once the account's deletion commits, no
 * service is asked further: their data is being deleted too.
 */
export async function* exportDocument(
  user: UserRow,
  deps: { repository: GatewayRepository; services: AccountServices; logger: Logger },
  requestId: string,
): AsyncGenerator<string> {
  const { repository, services } = deps;
  const userId = user.id;
  const [identities, sessions, keys] = await Promise.all([
    repository.users.identitiesOf(userId),
    repository.sessions.sessionsOf(userId),
    repository.apiKeys.apiKeysOf(userId),
  ]);
  yield `{"format":${json(EXPORT_FORMAT)},"version":${EXPORT_VERSION},"exported_at":${json(new Date().toISOString())},"user":${json(userView(user, identities))}`;
  yield `,"identities":${json(identities.map(identityView))},"sessions":${json(sessions.map(sessionView))},"api_keys":${json(keys.map(apiKeyView))}`;
  yield `,"credits":{"balance":${Number(user.balance)},"ledger":[`;
  let first = true;
  for (let after = 0; ; ) {
    const page = await repository.ledger.ledgerAfter(userId, after, LEDGER_PAGE);
    for (const entry of page) {
      yield `${first ? '' : ','}${json(ledgerView(entry))}`;
      first = false;
    }
    if (page.length < LEDGER_PAGE) break;
    after = Number(page[page.length - 1]!.id);
  }
  yield ']},"services":{';
  const errors: Record<string, string> = {};
  for (const [index, service] of ACCOUNT_SERVICES.entries()) {
    yield `${index === 0 ? '' : ','}${json(service)}:{`;
    if (errors[service] === ACCOUNT_GONE) {
      yield '}';
      continue;
    }
    let kind: string | undefined;
    try {
      let cursor: string | undefined;
      for (let pages = 0; ; pages += 1) {
        if (pages === MAX_PAGES_PER_SERVICE) throw new AccountServiceError(`the ${service} service's export did not end after ${pages} pages`);
        const page = await services.exportPage(service, userId, cursor, requestId);
        if (!(await repository.users.findUser(userId))) throw new AccountGone();
        if (page.kind !== kind && (page.items.length > 0 || page.kind !== 'end')) {
          yield `${kind === undefined ? '' : '],'}${json(page.kind)}:[`;
          kind = page.kind;
          first = true;
        }
        for (const item of page.items) {
          yield `${first ? '' : ','}${json(item)}`;
          first = false;
        }
        if (page.next_cursor === null) break;
        cursor = page.next_cursor;
      }
    } catch (error) {
      if (error instanceof AccountGone) for (const gone of ACCOUNT_SERVICES.slice(index)) errors[gone] = ACCOUNT_GONE;
      else if (error instanceof AccountServiceError) errors[service] = error.message;
      else {
        errors[service] = `the ${service} service's export failed`;
        deps.logger.error({ err: error, service }, 'export failed');
      }
    }
    yield `${kind === undefined ? '' : ']'}}`;
  }
  yield `},"errors":${json(errors)},"complete":${Object.keys(errors).length === 0}}`;
}
