/**
 * Who gets in (issue 21): every operation of every service's OpenAPI document × every kind of credential,
 * on the service directly and, where the gateway proxies the path, through the gateway. The expectation of
 * each cell is computed from the operation's declared `security` (required on every route by the kit, so a
 * new route cannot be public by omission) and from what each service makes of each credential (READS
 * below); the few operations that look further than the scheme (who a service key acts for) are named in
 * REFINED, each with its reason, and an entry that names no operation fails the test.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'mocha';
import { isOpen, readsOnly, routeOf, type UpstreamName } from '../../services/gateway/src/proxy/routing.ts';
import { graphAliases } from '../../services/graph/src/routes/params.ts';
import { ACCOUNT_DATA_ROUTE } from '../../services/kit/src/http/account-data.ts';
import type { ServiceName } from '../../services/kit/src/runtime/config.ts';
import { type Credentials, credentials, KINDS, type Kind } from './credentials.ts';
import { ERROR_BODIES, type SecurityPlatform, securityPlatform } from './platform.ts';

const SERVICES: ServiceName[] = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'];

/** What a service makes of a credential: the security schemes it satisfies, refused as invalid (401), or not read at all. */
type Reading = string[] | 'invalid' | 'absent';
const JWT_KINDS = ['expiredJwt', 'forgedJwt', 'hs256Jwt', 'algNoneJwt'] as const;
const reads = (table: Partial<Record<Kind, Reading>>, otherwise: Reading = 'absent'): Record<Kind, Reading> =>
  Object.fromEntries(KINDS.map((kind) => [kind, table[kind] ?? otherwise])) as Record<Kind, Reading>;
const badJwts = (reading: Reading) => Object.fromEntries(JWT_KINDS.map((kind) => [kind, reading]));

const READS: Record<ServiceName, Record<Kind, Reading>> = {
  gateway: reads({
    ...badJwts('invalid'),
    userJwt: ['BearerJWT'],
    apiKeyRead: ['ApiKey'],
    apiKeyWrite: ['ApiKey'],
    serviceKey: ['ServiceKey'],
    gatewayUser: ['ServiceKey'],
    wrongServiceKey: 'invalid',
    adminKey: ['AdminKey'],
    writerToken: 'invalid',
    simulationKey: 'invalid',
  }),
  // Generation, simulation and the conductor know their callers by one rule, the kit's gatewayCaller: a user's
  // access token (BearerJWT) or X-User-ID beside the service key names the user (UserId); X-User-ID alone is refused.
  generation: reads({
    ...badJwts('invalid'),
    userJwt: ['BearerJWT', 'UserId'],
    serviceKey: ['ServiceKey'],
    gatewayUser: ['ServiceKey', 'UserId'],
    spoofedUser: 'invalid',
    wrongServiceKey: 'invalid',
    writerToken: 'invalid',
  }),
  // A Bearer token is a writer token here: a JWT is not one.
  graph: reads({
    ...badJwts('invalid'),
    userJwt: 'invalid',
    serviceKey: ['ServiceKey'],
    gatewayUser: ['ServiceKey'],
    wrongServiceKey: 'invalid',
    adminKey: ['AdminKey'],
    writerToken: ['WriterToken'],
  }),
  // X-API-Key holds a simulation key here, not a gateway API key.
  simulation: reads({
    ...badJwts('invalid'),
    userJwt: ['BearerJWT', 'UserId'],
    apiKeyRead: 'invalid',
    apiKeyWrite: 'invalid',
    serviceKey: ['ServiceKey'],
    gatewayUser: ['ServiceKey', 'UserId'],
    spoofedUser: 'invalid',
    wrongServiceKey: 'invalid',
    writerToken: 'invalid',
    simulationKey: ['ApiKey'],
  }),
  conductor: reads({
    ...badJwts('invalid'),
    userJwt: ['BearerJWT', 'UserId'],
    serviceKey: ['ServiceKey'],
    gatewayUser: ['ServiceKey', 'UserId'],
    spoofedUser: 'invalid',
    wrongServiceKey: 'invalid',
    writerToken: 'invalid',
  }),
  billing: reads({ serviceKey: ['ServiceKey'], gatewayUser: ['ServiceKey'], wrongServiceKey: 'invalid', adminKey: ['AdminKey'] }),
};

type Outcome = 'admitted' | 401 | 403;
const BEARER_KINDS: Kind[] = ['expiredJwt', 'forgedJwt', 'hs256Jwt', 'algNoneJwt', 'userJwt', 'writerToken'];

/**
 * Operations whose handler decides further than the scheme, by whom a service credential acts for: a
 * function from the credential kind (and the outcome the scheme alone gives) to the outcome.
 */
const userOnly = (kind: Kind, outcome: Outcome): Outcome => (kind === 'serviceKey' && outcome === 'admitted' ? 403 : outcome);
/**
 * `inHandler`: the refusal comes from the handler, after the input is validated, so the matrix's empty
 * body meets 422 first (the scheme admitted the credential; the handler would refuse a valid body).
 */
const REFINED: Record<string, { reason: string; refine: (kind: Kind, outcome: Outcome) => Outcome; inHandler?: boolean }> = {};
for (const op of ['listConversations', 'getConversation', 'deleteConversation', 'sendMessage', 'getSettings', 'updateSettings']) {
  REFINED[`conductor:${op}`] = { reason: 'the conductor acts for a user: a service key must name one in X-User-ID', refine: userOnly, inHandler: true };
}
for (const op of ['createCheckout', 'getSubscription', 'getBillingHistory', 'cancelSubscription', 'resumeSubscription', 'createPortalSession']) {
  REFINED[`billing:${op}`] = {
    reason: "a user's purchase: the service key must name the user in X-User-ID",
    refine: (kind, outcome) => (kind === 'serviceKey' && outcome === 'admitted' ? 401 : outcome),
    inHandler: true,
  };
}
REFINED['gateway:refreshTokens'] = {
  reason: 'a refresh authenticates by its refresh token: the Authorization header (often a stale access token) is not read',
  refine: (kind, outcome) => (BEARER_KINDS.includes(kind) ? 'admitted' : outcome),
};
REFINED['gateway:revokeApiKey'] = {
  reason: 'an API key may revoke only itself (the matrix names another id)',
  refine: (kind, outcome) => (kind === 'apiKeyWrite' && outcome === 'admitted' ? 403 : outcome),
  inHandler: true,
};
for (const op of ['getUserBilling', 'resyncUserBilling']) {
  REFINED[`billing:${op}`] = {
    reason: 'an operator operation: refused to a service key acting for a user',
    refine: (kind, outcome) => (kind === 'gatewayUser' && outcome === 'admitted' ? 403 : outcome),
  };
}
for (const op of ['listSimulationBudgets', 'getSimulationBudget']) {
  REFINED[`simulation:${op}`] = {
    reason: 'budgets are read by a service acting as itself only',
    refine: (kind, outcome) => (outcome === 'admitted' && kind !== 'serviceKey' ? 403 : outcome),
  };
}
REFINED['simulation:simulate'] = {
  reason: "a start is paid: only a service (the gateway, which charged it, or the conductor) starts runs; a user's own token or the simulation key is refused",
  refine: (kind, outcome) => (outcome === 'admitted' && (kind === 'userJwt' || kind === 'simulationKey') ? 403 : outcome),
  inHandler: true,
};
// The account-data contract (docs/accounts.md): the gateway's own calls, the service key without X-User-ID.
for (const service of ['generation', 'graph', 'simulation', 'conductor', 'billing']) {
  for (const operation of ['deleteUserData', 'exportUserData']) {
    REFINED[`${service}:${operation}`] = {
      reason: "account deletion and export are the gateway's own calls: the service key without X-User-ID",
      refine: (kind, outcome) => (kind === 'gatewayUser' && outcome === 'admitted' ? 403 : outcome),
    };
  }
}

interface Operation {
  service: ServiceName;
  method: string;
  path: string;
  operationId: string;
  /** Undefined when the document does not declare it: a failure of its own. */
  security: string[] | undefined;
}

/** The outcome the policy gives a credential on an operation of a service reached directly. */
function expectedDirect(op: Operation, kind: Kind): Outcome {
  const outcome = bySchemes(op, kind);
  return REFINED[`${op.service}:${op.operationId}`]?.refine(kind, outcome) ?? outcome;
}

/** Whether the handler, not the scheme, refuses this credential (after validating the input). */
function refusedInHandler(op: Operation, kind: Kind): boolean {
  const refinement = REFINED[`${op.service}:${op.operationId}`];
  return Boolean(refinement?.inHandler) && refinement!.refine(kind, bySchemes(op, kind)) !== bySchemes(op, kind);
}

function bySchemes(op: Operation, kind: Kind): Outcome {
  const reading = READS[op.service][kind];
  const schemes = op.security ?? [];
  const scope = kind === 'apiKeyRead' ? 'read' : kind === 'apiKeyWrite' ? 'write' : undefined;
  const scopeMissing = op.service === 'gateway' && scope !== undefined && scope !== (readsOnly(op.method.toUpperCase(), op.path) ? 'read' : 'write');
  let outcome: Outcome;
  if (reading === 'invalid') outcome = 401;
  // The gateway holds an API key to its scope on every request, public operations included.
  else if (scopeMissing) outcome = 403;
  else if (schemes.length === 0) outcome = 'admitted';
  else if (reading === 'absent') outcome = 401;
  else if (reading.some((scheme) => schemes.includes(scheme))) outcome = 'admitted';
  else outcome = 403;
  return outcome;
}

/** The path at the gateway that reaches this operation, if the gateway proxies one to its service. */
function gatewayPath(op: Operation): string | undefined {
  // The account-data contract is the gateway's own call to each service; /api/v1/users/* is the gateway's.
  if (op.service === 'gateway' || op.path === ACCOUNT_DATA_ROUTE) return undefined;
  const candidates = op.service === 'graph' ? [op.path, ...graphAliases(op.path)] : [op.path];
  return candidates.find((path) => routeOf(path) === op.service);
}

/**
 * Through the gateway: it answers for credentials itself and forwards a user as `gatewayUser` (its service
 * key and X-User-ID), an open path as no credential at all, and strips every identity claim on the way.
 */
function expectedViaGateway(op: Operation, path: string, kind: Kind): Outcome {
  const reading = READS.gateway[kind];
  const method = op.method.toUpperCase();
  if (reading === 'invalid') return 401;
  const scope = kind === 'apiKeyRead' ? 'read' : kind === 'apiKeyWrite' ? 'write' : undefined;
  if (scope && scope !== (readsOnly(method, path) ? 'read' : 'write')) return 403;
  // Payment providers' webhooks authenticate by their signature: forwarded without any identity.
  if (op.service === 'billing' && method === 'POST' && path.startsWith('/api/v1/billing/webhooks/')) return expectedDirect(op, 'none');
  if (kind === 'userJwt' || scope) return expectedDirect(op, 'gatewayUser');
  const otherCredential = reading !== 'absent';
  if (otherCredential) return 403;
  return isOpen(op.service as UpstreamName, method, path) ? expectedDirect(op, 'none') : 401;
}

async function operations(platform: SecurityPlatform): Promise<Operation[]> {
  const all: Operation[] = [];
  for (const service of SERVICES) {
    const document = (await (await fetch(`${platform.urls[service]}/openapi.json`)).json()) as { paths: Record<string, Record<string, any>> };
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const security = Array.isArray(operation.security) ? operation.security.flatMap((entry: object) => Object.keys(entry)) : undefined;
        all.push({ service, method, path, operationId: operation.operationId, security });
      }
    }
  }
  return all;
}

/** Operations that end the caller's session or account: each request gets a user of its own. */
const ENDS_THE_CALLER = new Set(['gateway:logout', 'gateway:deleteMe']);

function concretePath(template: string, alice: string): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (name === 'user_id') return alice;
    if (name === 'path') return '1969/july/20/2017/united-states/florida/cape-canaveral/matrix-absent';
    if (name === 'name') return 'matrix-absent';
    return randomUUID();
  });
}

/** 401 and 403 are refusals; anything else (200, 404, 422, 400 …) got past authorization. */
const outcomeOf = (status: number): Outcome => (status === 401 || status === 403 ? (status as 401 | 403) : 'admitted');

async function send(base: string, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const hasBody = !['get', 'head', 'delete'].includes(method);
  const response = await fetch(`${base}${path}`, {
    method: method.toUpperCase(),
    headers: { ...headers, ...(hasBody ? { 'content-type': 'application/json' } : {}), accept: 'application/json' },
    ...(hasBody ? { body: '{}' } : {}),
    signal: AbortSignal.timeout(20_000),
  });
  const text = response.headers.get('content-type')?.includes('event-stream') ? '' : await response.text();
  if (!text) await response.body?.cancel().catch(() => {});
  if (response.status >= 400) ERROR_BODIES.push(`${response.status} ${[...response.headers].map(([name, value]) => `${name}: ${value}`).join('\n')}\n${text}`);
  return { status: response.status, text };
}

/** Runs `tasks` with at most `width` at once. */
async function pooled<T>(tasks: Array<() => Promise<T>>, width: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await tasks[index]!();
      }
    }),
  );
  return results;
}

describe('security: the authorization matrix (every operation × every credential, direct and through the gateway)', function () {
  this.timeout(300_000);
  let platform: SecurityPlatform;
  let creds: Credentials;
  let ops: Operation[];

  before(async function () {
    this.timeout(400_000);
    platform = await securityPlatform();
    creds = await credentials(platform);
    ops = await operations(platform);
  });

  it("finds every service's operations, each with a declared security policy, and no stale refinement", () => {
    for (const service of SERVICES)
      assert.ok(
        ops.some((op) => op.service === service),
        `${service} documents no operation`,
      );
    const undeclared = ops.filter((op) => op.security === undefined).map((op) => `${op.service} ${op.method.toUpperCase()} ${op.path}`);
    assert.deepEqual(undeclared, [], 'operations without a security declaration');
    const known = new Set(ops.map((op) => `${op.service}:${op.operationId}`));
    assert.deepEqual(
      Object.keys(REFINED).filter((key) => !known.has(key)),
      [],
      'REFINED names operations that no longer exist',
    );
  });

  it("reads every credential alike in the services behind the gateway (one rule, the kit's), but for the simulation's own X-API-Key", () => {
    const ownKey = new Set<Kind>(['apiKeyRead', 'apiKeyWrite', 'simulationKey']);
    for (const kind of KINDS.filter((k) => !ownKey.has(k))) {
      assert.deepEqual(READS.simulation[kind], READS.conductor[kind], `simulation and conductor read ${kind} alike`);
      assert.deepEqual(READS.generation[kind], READS.conductor[kind], `generation and conductor read ${kind} alike`);
    }
  });

  it('admits exactly the credentials each operation declares, and refuses the rest with 401 or 403', async () => {
    const cells: Array<{ op: Operation; lenient?: boolean; label: string; expected: Outcome; run: () => Promise<{ status: number; text: string }> }> = [];
    for (const op of ops) {
      for (const kind of KINDS) {
        const headersFor = async () => {
          if (!ENDS_THE_CALLER.has(`${op.service}:${op.operationId}`) || kind !== 'userJwt') return creds.headers(kind);
          return { authorization: `Bearer ${(await creds.freshUser()).access}` };
        };
        const direct = concretePath(op.path, creds.alice.id);
        cells.push({
          op,
          lenient: refusedInHandler(op, kind),
          label: `${op.service} ${op.method.toUpperCase()} ${op.path} (${op.operationId}) × ${kind}`,
          expected: expectedDirect(op, kind),
          run: async () => send(platform.urls[op.service], op.method, direct, await headersFor()),
        });
        const viaGateway = gatewayPath(op);
        if (viaGateway) {
          const path = concretePath(viaGateway, creds.alice.id);
          cells.push({
            op,
            label: `gateway → ${op.service} ${op.method.toUpperCase()} ${viaGateway} (${op.operationId}) × ${kind}`,
            expected: expectedViaGateway(op, path, kind),
            run: async () => send(platform.urls.gateway, op.method, path, creds.headers(kind)),
          });
        }
      }
    }
    const results = await pooled(
      cells.map((cell) => async () => {
        const { status, text } = await cell.run();
        return { cell, status, text };
      }),
      6,
    );
    const agrees = (cell: (typeof cells)[number], status: number) => {
      // A 503 is a dependency this platform does not configure (the App Store's certificates): past authorization, not a crash.
      if (status >= 500) return status === 503 && cell.expected === 'admitted';
      return outcomeOf(status) === cell.expected || (status === 422 && Boolean(cell.lenient));
    };
    const wrong = results
      .filter(({ cell, status }) => !agrees(cell, status))
      .map(({ cell, status, text }) => `${cell.label}: expected ${cell.expected}, got ${status} ${text.slice(0, 160)}`);
    const admitted = results.filter(({ cell }) => cell.expected === 'admitted').length;
    console.log(
      `      ${results.length} cells (${ops.length} operations × ${KINDS.length} credentials, direct and through the gateway): ${admitted} admitted, ${results.length - admitted} refused`,
    );
    for (const line of wrong) console.log(`      ✗ ${line}`);
    assert.equal(wrong.length, 0, `${wrong.length} cells differ from the policy (listed above)`);
  });
});
