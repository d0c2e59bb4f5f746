import { randomUUID } from 'node:crypto';
import type { Logger } from '@tempora/kit/observability';
import { ExportAccountGone, type ExportStaging, type GatewayRepository, type StagedPosition, type UserRow } from '../repository/index.ts';
import { apiKeyView, identityView, ledgerView, sessionView, userView } from '../views.ts';
import { ACCOUNT_SERVICES, AccountServiceError, type AccountServices } from './account-services.ts';
import { staged as stagedItem } from './export-order.ts';

const LEDGER_PAGE = 1000;
/** Staged items read back at a time. */
const SORTED_PAGE = 500;
/** Pages asked of one service before its export is declared endless (a cursor that never ends). */
const MAX_PAGES_PER_SERVICE = 100_000;

export const EXPORT_FORMAT = 'tempora-user-export';
export const EXPORT_VERSION = 2;

const json = (value: unknown) => JSON.stringify(value);
/** What `errors` says of each service not (fully) exported because the account's deletion committed meanwhile. */
const ACCOUNT_GONE = 'not exported: the account was deleted during the export';

/** The staged kind's items in order (export-order.ts), comma-separated, then its closing bracket; the stage is emptied for the next kind. */
async function* sortedKind(staging: ExportStaging, exportId: string): AsyncGenerator<string> {
  let first = true;
  for (let after: StagedPosition | undefined; ; ) {
    const page = await staging.sorted(exportId, after, SORTED_PAGE);
    for (const item of page.items) {
      yield `${first ? '' : ','}${item}`;
      first = false;
    }
    if (page.items.length < SORTED_PAGE) break;
    after = page.last;
  }
  await staging.clear(exportId);
  yield ']';
}

/**
 * The user's whole data as one JSON document (docs/accounts.md), streamed: the gateway's rows, the ledger a
 * page at a time, then each service's pages by kind, every list in a fixed order (oldest first, then by id;
 * a service's kind is staged in PostgreSQL to be put in that order). Nothing is held whole in memory and
 * nothing is cut short: a service that fails midway has its part closed where it stopped, named in `errors`, and the
 * document ends with `"complete": false`. Once the account's deletion commits, no service is asked further: their
 * data is being deleted too.
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
  const exportId = randomUUID();
  const staging = repository.exportStaging;
  await staging.sweep();
  try {
    for (const [index, service] of ACCOUNT_SERVICES.entries()) {
      yield `${index === 0 ? '' : ','}${json(service)}:{`;
      if (errors[service] === ACCOUNT_GONE) {
        yield '}';
        continue;
      }
      // A kind is staged as its pages arrive and written out in order once it ends (or its service fails).
      let kind: string | undefined;
      let staged = 0;
      try {
        let cursor: string | undefined;
        for (let pages = 0; ; pages += 1) {
          if (pages === MAX_PAGES_PER_SERVICE) throw new AccountServiceError(`the ${service} service's export did not end after ${pages} pages`);
          const page = await services.exportPage(service, userId, cursor, requestId);
          if (page.kind !== kind && (page.items.length > 0 || page.kind !== 'end')) {
            if (kind !== undefined) yield* sortedKind(staging, exportId);
            yield `${kind === undefined ? '' : ','}${json(page.kind)}:[`;
            kind = page.kind;
          }
          await staging.stage(exportId, userId, staged, page.items.map(stagedItem));
          staged += page.items.length;
          if (page.next_cursor === null) break;
          cursor = page.next_cursor;
        }
      } catch (error) {
        if (error instanceof ExportAccountGone) for (const gone of ACCOUNT_SERVICES.slice(index)) errors[gone] = ACCOUNT_GONE;
        else if (error instanceof AccountServiceError) errors[service] = error.message;
        else {
          errors[service] = `the ${service} service's export failed`;
          deps.logger.error({ err: error, service }, 'export failed');
        }
      }
      if (kind !== undefined) yield* sortedKind(staging, exportId);
      yield '}';
    }
  } finally {
    await staging.clear(exportId);
  }
  yield `},"errors":${json(errors)},"complete":${Object.keys(errors).length === 0}}`;
}
