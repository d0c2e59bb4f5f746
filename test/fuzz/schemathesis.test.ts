import assert from 'node:assert/strict';
import type { ServiceName } from '../../services/kit/src/runtime/config.ts';
import { pythonTool } from '../support/python.ts';
import { type Credentials, type FuzzPlatform, startFuzzPlatform } from './platform.ts';
import { REGRESSIONS, replay } from './regressions.ts';
import { type RunOptions, type RunResult, runSchemathesis, SCHEMATHESIS } from './schemathesis.ts';

/**
 * Schemathesis against every service's /openapi.json, every operation, with the credentials each needs:
 * no response may be a 5xx or differ from the service's own document. FUZZ_EXAMPLES sets the test cases
 * per operation and phase (default 10, bounded for `npm test`; a release runs 1000), FUZZ_SEED the seed
 * (fixed by default, so a failure here is reproducible; docs/reliability.md).
 */
const EXAMPLES = Number(process.env.FUZZ_EXAMPLES ?? 10);
const SEED = Number(process.env.FUZZ_SEED ?? 20261125);
/** `st run`s at once: two cores are shared by the platform and the generators. */
const PARALLEL = Number(process.env.FUZZ_PARALLEL ?? 2);

type Plan = Omit<RunOptions, 'examples' | 'seed' | 'url'> & { service: ServiceName };

/** Which credentials each service's runs present; ending a session or deleting an account uses a user of its own. */
async function plans(credentials: Credentials): Promise<Plan[]> {
  const { serviceKey, adminKey, writerToken, simulationKey, userJwt, userId, userApiKey } = credentials;
  const destructive = ['logout', 'deleteMe'];
  return [
    {
      service: 'gateway',
      name: 'gateway',
      credentials: { BearerJWT: userJwt, ApiKey: userApiKey, ServiceKey: serviceKey, AdminKey: adminKey },
      exclude: destructive,
    },
    ...(await Promise.all(
      destructive.map(async (id) => ({
        service: 'gateway' as const,
        name: `gateway-${id}`,
        credentials: { BearerJWT: (await credentials.disposableUser()).jwt },
        include: [id],
        phases: ['examples' as const, 'coverage' as const, 'fuzzing' as const],
      })),
    )),
    // X-User-ID is believed only beside the service key, which the gateway always sends with it.
    { service: 'generation', name: 'generation', credentials: { ServiceKey: serviceKey, UserId: userId }, headers: { 'X-Service-Key': serviceKey } },
    { service: 'graph', name: 'graph', credentials: { ServiceKey: serviceKey, WriterToken: writerToken } },
    { service: 'simulation', name: 'simulation', credentials: { ServiceKey: serviceKey, ApiKey: simulationKey, BearerJWT: userJwt } },
    { service: 'conductor', name: 'conductor', credentials: { BearerJWT: userJwt, ServiceKey: serviceKey } },
    // Billing's user operations read the user from X-User-ID beside the service key, as the gateway sends them.
    { service: 'billing', name: 'billing', credentials: { ServiceKey: serviceKey, AdminKey: adminKey }, headers: { 'X-User-ID': userId } },
  ];
}

/** Runs `tasks` with at most `limit` at once; each promise settles with its task. */
function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T>[] {
  let next = 0;
  const settled = tasks.map(() => Promise.withResolvers<T>());
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      await tasks[index]!().then(settled[index]!.resolve, settled[index]!.reject);
    }
  };
  for (let i = 0; i < Math.min(limit, tasks.length); i++) void worker();
  for (const { promise } of settled) promise.catch(() => undefined);
  return settled.map(({ promise }) => promise);
}

const SERVICES: ServiceName[] = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'];

describe(`Schemathesis (${SCHEMATHESIS}) over every OpenAPI document`, function () {
  this.timeout(Math.max(900_000, EXAMPLES * 60_000));
  let fuzz: FuzzPlatform;
  const runs = new Map<ServiceName, Promise<RunResult[]>>();

  before(async () => {
    // Installed before the platform starts: pip blocks this process, and with it the platform's output pipes.
    pythonTool('schemathesis', [SCHEMATHESIS]);
    fuzz = await startFuzzPlatform();
    const all = await plans(fuzz.credentials);
    const results = pool(
      all.map((plan) => () => runSchemathesis({ ...plan, url: fuzz.urls[plan.service], examples: EXAMPLES, seed: SEED })),
      PARALLEL,
    );
    for (const service of SERVICES) runs.set(service, Promise.all(results.filter((_, i) => all[i]!.service === service)));
  });

  after(async () => {
    await Promise.allSettled(runs.values());
    await fuzz?.stop();
  });

  for (const service of SERVICES) {
    it(`${service}: every operation, no 5xx, no response outside its schema`, async () => {
      const results = await runs.get(service)!;
      const document = (await (await fetch(`${fuzz.urls[service]}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
      const documented = Object.entries(document.paths).flatMap(([path, operations]) =>
        Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
      );
      const tested = new Set(results.flatMap((result) => result.operations.map((operation) => operation.operation)));
      assert.deepEqual(
        documented.filter((operation) => !tested.has(operation)),
        [],
        `operations Schemathesis did not test:\n${results.map((r) => r.output.slice(-3000)).join('\n')}`,
      );
      const failures = results.flatMap((result) =>
        result.operations.flatMap((operation) => operation.failures.map((failure) => `${result.name} ${operation.operation}\n${failure}`)),
      );
      const operations = (result: RunResult) => result.operations.filter((operation) => operation.operation !== 'Stateful tests').length;
      const summary = results
        .map((result) => `${result.name}: ${operations(result)} operations, ${result.cases} cases, ${result.seconds.toFixed(0)} s`)
        .join('; ');
      console.log(`      ${summary}`);
      assert.equal(failures.length, 0, `${summary}\n\n${failures.join('\n\n')}\n\nwarnings:\n${results.map((r) => r.warnings).join('\n')}`);
      assert.ok(
        results.every((result) => result.exitCode === 0),
        results.map((r) => r.output.slice(-3000)).join('\n'),
      );
    });
  }

  describe('regressions: every failing example Schemathesis found, replayed against the real service', () => {
    for (const regression of REGRESSIONS) {
      it(regression.title, async () => {
        await replay(regression, fuzz);
      });
    }
  });
});
