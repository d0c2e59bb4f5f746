// The platform end to end on a real node: the operator, running in the cluster from its own image,
// turns a TemporaGateway, four GraphWorkers and an AgentPool into pods of our images; the test then uses the
// platform through the gateway's Service as a client would (sign-in, graph, a scene whose agents run on
// the pool's pods, credits, per-client rate limits), runs the daily CronJob by hand, deletes a pod and
// rolls out a new image tag while requests keep coming, rolls it back while generations and simulations
// run on a slow model, and deletes the TemporaGateway.
//
// The node needs Linux, root and cgroups; elsewhere the suite is skipped and says why.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { DEPLOYED_SERVICES } from '../../operator/src/reconcilers/platform-services.ts';
import { applyAs, condition, waitReady } from '../../operator/test/cluster.ts';
import { skipWithoutNode } from '../k8s/node.ts';
import { signatureFor } from '../support/stand-ins/stripe.ts';
import { waitFor } from '../support/wait.ts';
import { ensureTraefik, INGRESS_CLASS, type Ingress, startTraefik } from './ingress.ts';
import { type ModelVendor, startModelVendor } from './model-vendor.ts';
import {
  type Answer,
  agentPoolResource,
  call,
  gatewayResource,
  gatewayUrl,
  graphWorkerResource,
  KEYS,
  NAMESPACE,
  type Platform,
  STRIPE_WEBHOOK_SECRET,
  simulationBudgetResource,
  startPlatform,
} from './platform.ts';

const GATEWAY = 'tempora';
/** The providers Secret naming the model vendor of the rollback test. */
const VENDOR_SECRET = 'tempora-model-vendor';
const TAG = 'e2e-1';
const NEXT_TAG = 'e2e-2';
const WORKERS = ['renderer', 'expander', 'judge', 'daily'] as const;
const POOL = 'agents';
const BUDGET = 'platform-daily';
const HOST = 'tempora.e2e.test';
/**
 * Two gateway replicas (one is deleted while the other answers), an Ingress for Traefik, and room for the
 * loops below in the Free tier (demo accounts are Free: 10 requests a minute by default). Below the
 * account's 300 authenticated reads a minute, so the tier's window is the one the headers report.
 */
const FREE_PER_MINUTE = 250;
const GATEWAY_OPTIONS = {
  replicas: { gateway: 2 },
  ingress: { host: HOST, className: INGRESS_CLASS },
  tiers: [{ name: 'free', requestsPerMinute: FREE_PER_MINUTE, dailyLimit: 10_000 }],
};
/** A moment of the graph's seed. */
const BASTILLE = '1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
const Job: R.ResourceType = { group: 'batch', version: 'v1', kind: 'Job', plural: 'jobs' };
const ReplicaSet: R.ResourceType = { group: 'apps', version: 'v1', kind: 'ReplicaSet', plural: 'replicasets' };

interface PodStatus {
  phase?: string;
  podIP?: string;
  conditions?: { type: string; status: string }[];
}
const podStatus = (pod: KubeObject) => (pod.status ?? {}) as PodStatus;
/**
 * The image a pod was made with. Its container status would name the image's first tag instead: the two
 * tags of the rollout below are the same image, and containerd reports one name per image.
 */
const podImage = (pod: KubeObject) => (pod.spec as { containers: { image: string }[] }).containers[0]!.image;
const podReady = (pod: KubeObject) => podStatus(pod).conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/**
 * The two ways in: the gateway's Service (its ClusterIP), where the test appends the client's address to
 * X-Forwarded-For as an ingress would, and the Ingress (Traefik), where clients are told apart by the
 * address they connect from (any of 127.0.0.0/8 on Linux) and Traefik appends it.
 */
interface Entrance {
  name: string;
  /** A new client's identity: its address. */
  newClient(): string;
  request(path: string, client: string, options?: { method?: string; headers?: Record<string, string>; body?: unknown; timeoutMs?: number }): Promise<Answer>;
}

function serviceEntrance(url: () => string): Entrance {
  let next = 1;
  return {
    name: "the gateway's Service",
    newClient: () => `198.51.${100 + Math.floor(next / 250)}.${(next++ % 250) + 1}`,
    request: (path, client, options = {}) => call(`${url()}${path}`, { ...options, headers: { ...options.headers, 'x-forwarded-for': client } }),
  };
}

function ingressEntrance(ingress: () => Ingress): Entrance {
  let next = 2;
  return {
    name: 'the Ingress (Traefik)',
    newClient: () => `127.0.${Math.floor(next / 250)}.${(next++ % 250) + 1}`,
    request: (path, client, options = {}) => call(`${ingress().url}${path}`, { ...options, localAddress: client, headers: { ...options.headers, host: HOST } }),
  };
}

describe('the platform on a real node: operator, CRs, pods, traffic (test/e2e)', function () {
  let platform: Platform | undefined;
  let ingress: Ingress | undefined;
  let gw = '';
  let vendor: ModelVendor | undefined;
  const entrances = [serviceEntrance(() => gw), ingressEntrance(() => ingress!)];
  /** Per entrance: its user's client address, access token and scene. */
  const users = new Map<Entrance, { client: string; token: string; sceneId: string }>();

  const admin = () => platform!.admin;
  const asUser = (entrance: Entrance) => ({ authorization: `Bearer ${users.get(entrance)!.token}` });
  const ok = (answer: Answer, what: string) => {
    assert.equal(answer.status, 200, `${what}: ${answer.status} ${answer.body.slice(0, 500)}`);
    return answer;
  };
  /** Rethrows a failed wait with what the cluster says about it. */
  const explained = async (err: unknown): Promise<never> => {
    throw new Error(`${String(err)}\n${await platform!.report().catch((e: unknown) => `(no report: ${String(e)})`)}`);
  };
  /** The pods `owner` made, those stopping too. */
  const allPodsOf = async (owner: KubeObject) => (await admin().list(R.Pod, { labelSelector: `tempora.dev/owner-uid=${owner.metadata.uid}` }, NAMESPACE)).items;
  const podsOf = async (owner: KubeObject) => (await allPodsOf(owner)).filter((p) => !p.metadata.deletionTimestamp);

  before(async function () {
    skipWithoutNode(this);
    // A first run builds Kubernetes, BuildKit, CoreDNS, Traefik, the base image and an image per
    // deployable (docs/operator.md, "End to end"); cached, this takes seconds.
    this.timeout(90 * 60_000);
    const traefik = ensureTraefik();
    platform = await startPlatform(TAG);
    ingress = await startTraefik(platform.node, platform.admin, traefik);
  });

  after(async function () {
    this.timeout(120_000);
    await ingress?.stop();
    await vendor?.stop();
    if (platform) assert.deepEqual(await platform.stop(), [], 'the node left the host as it was');
  });

  it('brings every pod to Ready, and the custom resources report Ready only then', async function () {
    this.timeout(15 * 60_000);
    const resources = [
      gatewayResource(GATEWAY, TAG, GATEWAY_OPTIONS),
      ...WORKERS.map((role) => graphWorkerResource(role, role, GATEWAY, TAG)),
      agentPoolResource(POOL, GATEWAY, TAG),
      simulationBudgetResource(BUDGET, GATEWAY),
    ];
    const wanted: Record<string, number> = { TemporaGateway: DEPLOYED_SERVICES.length + 1, GraphWorker: 1, AgentPool: 1 };
    const applied: KubeObject[] = [];
    for (const r of resources) applied.push(await applyAs(admin(), r));
    const kinds: Record<string, R.ResourceType> = {
      TemporaGateway: R.TemporaGateway,
      GraphWorker: R.GraphWorker,
      AgentPool: R.AgentPool,
      SimulationBudget: R.SimulationBudget,
    };
    const typeOf = (o: KubeObject) => kinds[o.kind]!;
    // The daily worker's CronJob and a budget (enforced by the simulation pods) have no pods of their own.
    const podless = (o: KubeObject) => (o.spec as { role?: string }).role === 'daily' || o.kind === 'SimulationBudget';

    // Each custom resource is watched until it and its pods are Ready; whenever it says Ready, its pods
    // must be Ready then (read after it), and it must have said otherwise while they were not.
    const violations: string[] = [];
    const seenNotReady = new Set<string>();
    const done = new Set<string>();
    const started = Date.now();
    await waitFor(
      'every custom resource Ready with all its pods',
      async () => {
        for (const o of applied) {
          const key = `${o.kind}/${o.metadata.name}`;
          if (done.has(key)) continue;
          const current = await admin().get(typeOf(o), NAMESPACE, o.metadata.name);
          const ready = condition(current, 'Ready');
          const isReady = ready?.status === 'True' && ready.observedGeneration === current.metadata.generation;
          const pods = podless(current) ? [] : await podsOf(current);
          const readyPods = pods.filter(podReady).length;
          const want = podless(current) ? 0 : wanted[o.kind]!;
          if (!isReady) {
            seenNotReady.add(key);
            continue;
          }
          if (readyPods < want || readyPods < pods.length)
            violations.push(`${key} Ready with ${readyPods}/${Math.max(want, pods.length)} pods Ready (${ready?.message})`);
          else done.add(key);
        }
        return done.size === applied.length;
      },
      { timeoutMs: 12 * 60_000, intervalMs: 500 },
    ).catch(explained);
    console.log(`      all Ready ${((Date.now() - started) / 1000).toFixed(0)} s after the apply`);
    gw = await gatewayUrl(admin(), GATEWAY);
    assert.deepEqual(violations, []);
    // Every resource with pods was seen not Ready while they started.
    for (const o of applied.filter((r) => !podless(r)))
      assert.ok(seenNotReady.has(`${o.kind}/${o.metadata.name}`), `${o.kind}/${o.metadata.name} seen not Ready`);

    // Every pod of the platform runs the image its custom resource names, none restarted for good. A
    // resource found Ready early may roll its pods once more as the others arrive (the AgentPool changes
    // the generation Deployment's environment): its surge and terminating pods are waited out.
    const expected = DEPLOYED_SERVICES.length + 1 + 3 + 1;
    let all: KubeObject[] = [];
    await waitFor(
      `the platform's ${expected} pods, no rollout under way`,
      async () => {
        all = (await admin().list(R.Pod, { labelSelector: 'app.kubernetes.io/managed-by=tempora-operator' }, NAMESPACE)).items;
        return all.length === expected && all.every((pod) => !pod.metadata.deletionTimestamp && podReady(pod));
      },
      { timeoutMs: 2 * 60_000, intervalMs: 500 },
    ).catch(() =>
      assert.fail(
        `pods: ${all.map((p) => `${p.metadata.name}${p.metadata.deletionTimestamp ? ' (terminating)' : podReady(p) ? '' : ' (not Ready)'}`).join(', ')}`,
      ),
    );
    for (const pod of all) {
      assert.ok(podReady(pod), `${pod.metadata.name} Ready`);
      assert.match(podImage(pod), new RegExp(`^local/\\w+:${TAG}$`));
    }
    // Counts that moved during a rollout may be written up to a minute later (docs/operator.md, Conditions).
    type GatewayStatus = { state: string; services: { name: string; availableReplicas: number }[] };
    const available = (status: GatewayStatus) => Object.fromEntries(status.services.map((s) => [s.name, s.availableReplicas]));
    const wantedAvailable = Object.fromEntries(DEPLOYED_SERVICES.map((s) => [s, s === 'gateway' ? 2 : 1]));
    let gatewayStatus = (await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY)).status as GatewayStatus;
    await waitFor(
      'the TemporaGateway status counting every service available',
      async () => {
        gatewayStatus = (await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY)).status as GatewayStatus;
        return isDeepStrictEqual(available(gatewayStatus), wantedAvailable);
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    ).catch(() => undefined);
    assert.equal(gatewayStatus.state, 'External');
    assert.deepEqual(available(gatewayStatus), wantedAvailable);
  });

  for (const entrance of entrances) {
    it(`signs in, walks the graph, renders a scene whose agents ran on the pool, and charges for it, through ${entrance.name}`, async function () {
      this.timeout(5 * 60_000);
      const client = entrance.newClient();
      const send = (path: string, options: Parameters<Entrance['request']>[2] = {}) => entrance.request(path, client, options);
      const signIn = await send('/api/v1/auth/demo', { body: {} });
      assert.equal(signIn.status, 201, signIn.body);
      const user = { client, token: signIn.json<{ access_token: string }>().access_token, sceneId: '' };
      users.set(entrance, user);
      const me = ok(await send('/api/v1/auth/me', { headers: asUser(entrance) }), 'me');
      assert.equal(me.json<{ tier: string }>().tier, 'free');
      // The TemporaGateway's spec.rateLimits.tiers reached the gateway's pods (RATE_LIMIT_TIERS).
      assert.equal(Number(me.headers['x-ratelimit-limit']), FREE_PER_MINUTE);

      const traversal = ok(await send(`/api/v1/graph/traverse/${BASTILLE}?direction=both&depth=2`, { headers: asUser(entrance) }), 'traverse').json<{
        nodes: { name: string; hop: number }[];
        node_count: number;
      }>();
      assert.ok(traversal.node_count > 1, JSON.stringify(traversal).slice(0, 300));
      assert.ok(traversal.nodes.some((n) => n.hop === 0 && /Bastille/.test(n.name)));
      assert.ok(traversal.nodes.some((n) => n.hop >= 1));

      const poolPods = await podsOf(await admin().get(R.AgentPool, NAMESPACE, POOL));
      const poolTasks = async () => {
        let sum = 0;
        for (const pod of poolPods) {
          const metrics = ok(await call(`http://${podStatus(pod).podIP}:8091/metrics`), 'pool metrics').body;
          sum += Number(/^generation_worker_tasks_total(?:\{[^}]*\})? (\d+)/m.exec(metrics)?.[1] ?? NaN);
        }
        return sum;
      };
      const tasksBefore = await poolTasks();
      const balance = async () => ok(await send('/api/v1/credits/balance', { headers: asUser(entrance) }), 'balance').json<{ balance: number }>().balance;
      const balanceBefore = await balance();
      const scene = await send('/api/v1/timepoints/generate/sync', {
        body: { query: 'Gutenberg prints the first Bible in Mainz, 1455' },
        headers: asUser(entrance),
        timeoutMs: 240_000,
      });
      assert.equal(scene.status, 200, scene.body.slice(0, 500));
      const body = scene.json<{ id: string; title: string }>();
      user.sceneId = body.id;
      assert.ok(body.title, scene.body.slice(0, 300));
      // The generation pod handed its agents to the pool's stream; the pool's pods ran them.
      const ran = (await poolTasks()) - tasksBefore;
      assert.ok(ran >= 10, `the pool ran ${ran} agent tasks`);

      const charged = Number(scene.headers['x-credits-charged']);
      assert.ok(charged > 0, `charged ${charged}`);
      const balanceAfter = await balance();
      assert.equal(balanceAfter, balanceBefore - charged);
      assert.equal(Number(scene.headers['x-balance-after']), balanceAfter);
      ok(await send(`/api/v1/timepoints/${user.sceneId}`, { headers: asUser(entrance) }), 'the scene, read back');
    });
  }

  for (const entrance of entrances) {
    it(`counts X-RateLimit-* per anonymous client, not per proxy, on both gateway replicas, through ${entrance.name}`, async function () {
      this.timeout(60_000);
      const [a, b] = [entrance.newClient(), entrance.newClient()];
      const read = async (client: string, headers: Record<string, string> = {}) => {
        const answer = ok(await entrance.request('/api/v1/graph/moments?limit=1', client, { headers }), `anonymous read as ${client}`);
        return { limit: Number(answer.headers['x-ratelimit-limit']), remaining: Number(answer.headers['x-ratelimit-remaining']) };
      };
      const first = await read(a);
      assert.ok(first.limit > 0 && first.remaining === first.limit - 1, JSON.stringify(first));
      // Two replicas answer in turn (the proxy picks either); the count is Redis's, one for the client.
      for (let i = 2; i <= 6; i++) assert.equal((await read(a)).remaining, first.limit - i);
      // Another client starts afresh: the proxy's own address is not the key.
      assert.equal((await read(b)).remaining, first.limit - 1);
      // An address the client wrote itself buys no new budget: the Service's caller writes it left of the
      // one the proxy appends; Traefik drops it, as it trusts no client's X-Forwarded-For.
      const spoofed = entrance === entrances[0] ? `203.0.113.7, ${a}` : a;
      const spoofHeaders: Record<string, string> = entrance === entrances[0] ? {} : { 'x-forwarded-for': '203.0.113.7' };
      assert.equal((await read(spoofed, spoofHeaders)).remaining, first.limit - 7);
    });
  }

  /** The first entrance's user (signed in above), for the services behind the gateway. */
  const asFirstUser = (path: string, options: Parameters<Entrance['request']>[2] = {}) => {
    const entrance = entrances[0]!;
    return entrance.request(path, users.get(entrance)!.client, { ...options, headers: { ...asUser(entrance), ...options.headers } });
  };
  const firstUserBalance = async () => ok(await asFirstUser('/api/v1/credits/balance'), 'balance').json<{ balance: number }>().balance;

  it("sells a credit pack: checkout through the gateway, Stripe's signed webhook through the gateway to the billing pod, granted once", async function () {
    this.timeout(3 * 60_000);
    const stripe = platform!.stripe;
    stripe.setWebhookUrl(`${gw}/api/v1/billing/webhooks/stripe`);
    const pack = ok(await asFirstUser('/api/v1/billing/packs'), 'packs')
      .json<{ items: { id: string; credits: number }[] }>()
      .items.find((p) => p.id === 'starter')!;
    const before = await firstUserBalance();
    const checkout = await asFirstUser('/api/v1/billing/checkout', { body: { kind: 'pack', id: 'starter' } });
    assert.equal(checkout.status, 201, checkout.body.slice(0, 500));
    const session = checkout.json<{ id: string; url: string }>();
    assert.ok(session.url.startsWith('http'), session.url);

    // What the buyer's payment on the checkout page makes Stripe send: signed events, delivered through the
    // gateway (no user credential: the signature is the credential) to the billing pod.
    const events = await stripe.pay(session.id);
    const deliveries = stripe.deliveries.filter((d) => events.some((e) => e.id === d.event));
    assert.ok(deliveries.length > 0 && deliveries.every((d) => d.status === 200), JSON.stringify(deliveries));
    // Billing grants through its outbox into the gateway's ledger.
    await waitFor('the pack credited', async () => (await firstUserBalance()) === before + pack.credits, { timeoutMs: 60_000, intervalMs: 500 });

    // Stripe delivers at least once: the same event again, freshly signed, grants nothing more.
    const completed = events.find((e) => e.type === 'checkout.session.completed')!;
    const payload = JSON.stringify(completed);
    const again = await call(`${gw}/api/v1/billing/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signatureFor(payload, [STRIPE_WEBHOOK_SECRET]) },
      body: completed,
    });
    assert.equal(again.status, 200, again.body.slice(0, 300));
    // A forged one (another secret) is refused and grants nothing.
    const forged = await call(`${gw}/api/v1/billing/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signatureFor(payload, ['whsec_forged_0123456789']) },
      body: completed,
    });
    assert.equal(forged.status, 400, forged.body.slice(0, 300));
    await new Promise((r) => setTimeout(r, 3_000));
    assert.equal(await firstUserBalance(), before + pack.credits);
    const purchases = ok(await asFirstUser('/api/v1/billing/history'), 'billing history').json<{
      items: { kind: string; credits: number; provider: string }[];
    }>().items;
    assert.deepEqual(
      purchases.map((p) => [p.kind, p.credits, p.provider]),
      [['purchase', pack.credits, 'stripe']],
    );
  });

  it('runs a simulation on its pod through the gateway, charged once, and its SimulationBudget reports the spend', async function () {
    this.timeout(5 * 60_000);
    const before = await firstUserBalance();
    const started = await asFirstUser('/api/v1/simulate?wait=60', {
      body: { prompt: 'The Congress of Vienna redraws Europe, 1815', mode: 'BRANCHING', fidelity: 1 },
      timeoutMs: 90_000,
    });
    assert.ok([200, 202].includes(started.status), `${started.status} ${started.body.slice(0, 500)}`);
    const charged = Number(started.headers['x-credits-charged']);
    assert.ok(charged > 0, `charged ${charged}`);
    const id = started.json<{ id: string }>().id;
    const run = await waitFor(
      `run ${id} ended`,
      async () => {
        const r = ok(await asFirstUser(`/api/v1/simulations/${id}`), 'the run').json<{
          status: string;
          progress: { percent: number };
          cost: { actual_usd: number };
        }>();
        return ['completed', 'failed', 'stopped', 'cancelled'].includes(r.status) ? r : undefined;
      },
      { timeoutMs: 3 * 60_000, intervalMs: 1000 },
    );
    assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
    assert.equal(run.progress.percent, 100);
    const result = ok(await asFirstUser(`/api/v1/simulations/${id}/result`), 'result').json<{ result: { branching?: unknown } }>();
    assert.ok(result.result.branching, 'a branching run compares the counterfactual with its baseline');
    assert.equal(await firstUserBalance(), before - charged);

    // The operator's ConfigMap is what the pod enforces; the pod's report comes back into the CR's status.
    const budget = await waitFor(
      'the budget reports the run',
      async () => {
        const b = await admin().get(R.SimulationBudget, NAMESPACE, BUDGET);
        return Number(b.status?.spentUsd ?? 0) >= run.cost.actual_usd && condition(b, 'Ready')?.status === 'True' ? b : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    ).catch(explained);
    assert.ok(Number(budget.status?.spentUsd) > 0, JSON.stringify(budget.status));
    assert.equal(condition(budget, 'Exhausted')?.status, 'False');
  });

  it('answers a request in plain words through the conductor pod: its tool calls are charged once each, as the ledger shows', async function () {
    this.timeout(5 * 60_000);
    const before = await firstUserBalance();
    const answer = await asFirstUser('/api/v1/conductor/messages', {
      body: { content: 'Show me what led from the Bastille to Waterloo, then render the coronation of 1804' },
      timeoutMs: 240_000,
    });
    assert.equal(answer.status, 200, answer.body.slice(0, 500));
    const reply = answer.json<{ reply: string; tools_called: { tool: string; credits: number; status: string }[]; spend: { credits_total: number } }>();
    assert.ok(reply.reply.length > 0);
    const tools = reply.tools_called.map((t) => t.tool);
    assert.ok(tools.length >= 2, `tools called: ${tools.join(', ')}`);
    assert.ok(
      reply.tools_called.every((t) => t.status === 'ok'),
      JSON.stringify(reply.tools_called),
    );
    const paid = reply.tools_called.filter((t) => t.credits > 0);
    assert.ok(paid.length >= 1, 'rendering a scene is paid');
    assert.equal(
      reply.spend.credits_total,
      paid.reduce((sum, t) => sum + t.credits, 0),
    );
    // Charged once per paid call, by the conductor (the gateway charges nothing for the message itself).
    assert.equal(await firstUserBalance(), before - reply.spend.credits_total);
    const history = ok(await asFirstUser(`/api/v1/credits/history?limit=${paid.length}`), 'history').json<{ items: { amount: number }[] }>();
    assert.deepEqual(history.items.map((i) => -Number(i.amount)).sort(), paid.map((t) => t.credits).sort());
  });

  it("runs the daily CronJob by hand: its Job completes and adds today's moments", async function () {
    this.timeout(6 * 60_000);
    const [entrance] = entrances;
    const today = async () =>
      ok(await entrance!.request('/api/v1/graph/today?limit=100', users.get(entrance!)!.client, { headers: asUser(entrance!) }), 'today').json<{
        items: { event_name?: string; name?: string }[];
        total: number;
      }>();
    const before = await today();
    const cron = await admin().get(R.CronJob, NAMESPACE, 'daily');
    // What `kubectl create job --from=cronjob/daily` makes.
    const name = `daily-manual-${randomUUID().slice(0, 5)}`;
    await admin().create(Job, NAMESPACE, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name,
        namespace: NAMESPACE,
        annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' },
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'daily', uid: cron.metadata.uid!, controller: true }],
      },
      spec: (cron.spec as { jobTemplate: { spec: Record<string, unknown> } }).jobTemplate.spec,
    });
    const job = await waitFor(
      `Job ${name} finished`,
      async () => {
        const j = await admin().get(Job, NAMESPACE, name);
        const conditions = (j.status?.conditions ?? []) as { type: string; status: string }[];
        return conditions.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ? j : undefined;
      },
      { timeoutMs: 5 * 60_000, intervalMs: 1000 },
    );
    const logs = async () => {
      const pods = (await admin().list(R.Pod, { labelSelector: `job-name=${name}` }, NAMESPACE)).items;
      return Promise.all(
        pods.map((p) =>
          admin()
            .request<string>('GET', `/api/v1/namespaces/${NAMESPACE}/pods/${p.metadata.name}/log`)
            .catch((e: unknown) => String(e)),
        ),
      );
    };
    assert.equal(condition(job, 'Complete')?.status, 'True', `the Job failed:\n${(await logs()).join('\n---\n').slice(-3000)}`);
    const after = await today();
    assert.ok(after.total > before.total, `today's moments: ${before.total} before, ${after.total} after`);
  });

  /**
   * Requests to every service through both entrances in turn, one after another (a new connection each)
   * until `until` resolves; returns how many were answered and the failures (anything but 200).
   */
  async function trafficDuring(until: Promise<unknown>): Promise<{ answered: number; failures: string[] }> {
    let finished = false;
    const stop = until.finally(() => (finished = true));
    const failures: string[] = [];
    let answered = 0;
    const requests: Array<() => Promise<Answer>> = entrances.flatMap((e) => {
      const user = users.get(e)!;
      return [
        () => e.request('/api/v1/graph/moments?limit=1', e.newClient()),
        () => e.request(`/api/v1/timepoints/${user.sceneId}`, user.client, { headers: asUser(e) }),
        () => e.request('/api/v1/simulations?limit=1', user.client, { headers: asUser(e) }),
        () => e.request('/api/v1/credits/balance', user.client, { headers: asUser(e) }),
      ];
    });
    for (let i = 0; !finished; i++) {
      const at = new Date().toISOString().slice(11, 23);
      try {
        const answer = await requests[i % requests.length]!();
        if (answer.status === 200) answered++;
        else failures.push(`${at} ${entrances[Math.floor((i % requests.length) / 4)]!.name}: ${answer.status} ${answer.body.slice(0, 200)}`);
      } catch (err) {
        failures.push(`${at} ${entrances[Math.floor((i % requests.length) / 4)]!.name}: ${String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await stop;
    return { answered, failures };
  }

  it('replaces a deleted gateway pod while requests keep being answered (two replicas)', async function () {
    this.timeout(5 * 60_000);
    const owner = await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY);
    const gatewayPods = async () => (await podsOf(owner)).filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] === 'gateway');
    const [victim] = await gatewayPods();
    const replaced = (async () => {
      await new Promise((r) => setTimeout(r, 3_000));
      await admin().delete(R.Pod, NAMESPACE, victim!.metadata.name);
      return waitFor(
        'a new gateway pod Ready in place of the deleted one',
        async () => {
          const pods = await gatewayPods();
          return pods.length === 2 && pods.every(podReady) && !pods.some((p) => p.metadata.name === victim!.metadata.name) ? pods : undefined;
        },
        { timeoutMs: 3 * 60_000, intervalMs: 500 },
      ).catch(explained);
    })();
    const traffic = await trafficDuring(replaced.then(() => new Promise((r) => setTimeout(r, 3_000))));
    await replaced;
    console.log(`      ${traffic.answered} requests answered during the replacement`);
    assert.deepEqual(traffic.failures, []);
    assert.ok(traffic.answered > 10);
  });

  /** The Secrets a TemporaGateway below names for its model providers (spec.secrets.providers). */
  const PROVIDER_SECRETS = ['tempora-providers', VENDOR_SECRET];
  const secretsOf = (pod: KubeObject) =>
    ((pod.spec as { containers: { envFrom?: { secretRef?: { name: string } }[] }[] }).containers[0]!.envFrom ?? []).flatMap((e) =>
      e.secretRef ? [e.secretRef.name] : [],
    );

  /**
   * Applies the TemporaGateway `resource` and waits until it is Ready at its new generation with only pods
   * of `tag` left, those calling models given the `providers` Secret; the seconds it took.
   */
  async function rollOut(resource: KubeObject, tag: string, providers = 'tempora-providers'): Promise<number> {
    const updated = await applyAs(admin(), resource);
    const started = Date.now();
    await waitReady(admin(), R.TemporaGateway, NAMESPACE, GATEWAY, 10 * 60_000).catch(explained);
    // Ready at the new generation means every Deployment rolled out. The old pods may still be stopping: a
    // stopping pod serves through its preStop sleep (a client's kept-alive connection reaches it), so they
    // are waited out too.
    const owner = await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY);
    assert.ok(owner.metadata.generation! >= updated.metadata.generation!);
    const pods = () => allPodsOf(owner);
    const current = (p: KubeObject) =>
      podReady(p) && podImage(p).endsWith(`:${tag}`) && secretsOf(p).every((s) => s === providers || !PROVIDER_SECRETS.includes(s));
    await waitFor(
      'only new pods left',
      async () => {
        const now = await pods();
        return now.length === DEPLOYED_SERVICES.length + 1 && now.every(current);
      },
      { timeoutMs: 3 * 60_000, intervalMs: 1000 },
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${(await pods()).map((p) => `${p.metadata.name} ${podImage(p)} ready=${podReady(p)} ${secretsOf(p)}`).join(', ')}`);
    });
    return (Date.now() - started) / 1000;
  }

  it('rolls a new image tag out to every service with no failed request', async function () {
    this.timeout(15 * 60_000);
    await platform!.buildServiceImages(NEXT_TAG);
    const rollout = rollOut(gatewayResource(GATEWAY, NEXT_TAG, GATEWAY_OPTIONS), NEXT_TAG);
    const traffic = await trafficDuring(rollout.then(() => new Promise((r) => setTimeout(r, 3_000))));
    console.log(`      rolled out in ${(await rollout).toFixed(0)} s; ${traffic.answered} requests answered meanwhile`);
    assert.deepEqual(traffic.failures, []);
    // Only the TemporaGateway changed: the workers and the pool keep their tag.
    const poolPods = await podsOf(await admin().get(R.AgentPool, NAMESPACE, POOL));
    assert.ok(poolPods.every((p) => podImage(p).endsWith(`:${TAG}`)));
  });

  it('rolls back while 5 async generations and 3 simulations run on a slow model: each completes once, charged once', async function () {
    this.timeout(20 * 60_000);
    // A model vendor slow enough that the work outlasts a rollout's start: 20 s a generation agent's call
    // (a scene stays within its 300 s deadline), 40 s a simulation's; each below the callers' 60 s timeout,
    // so nothing is retried for its slowness. The pool's agents and the services call it from now on; the
    // graph workers stay offline.
    vendor = await startModelVendor({ slowMs: { agents: 20_000, others: 40_000 }, fastMs: 200 });
    const address = await platform!.node.exposeHostPort('model-vendor', vendor.port, NAMESPACE);
    await applyAs(admin(), {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: VENDOR_SECRET, namespace: NAMESPACE },
      type: 'Opaque',
      stringData: { FREE_IMAGE_ENABLED: 'false', OPENROUTER_BASE_URL: `http://${address}/api/v1`, OPENROUTER_API_KEY: 'sk-or-e2e-0123456789' },
    } as KubeObject);
    // Built by the test above; cached, when it did not run, in seconds.
    await platform!.buildServiceImages(NEXT_TAG);
    // A pod reads its Secrets' variables when it starts: naming another Secret rolls the pods that call models.
    const poolWith = await applyAs(admin(), agentPoolResource(POOL, GATEWAY, TAG, [VENDOR_SECRET]));
    const withVendor = { ...GATEWAY_OPTIONS, providers: VENDOR_SECRET };
    await rollOut(gatewayResource(GATEWAY, NEXT_TAG, withVendor), NEXT_TAG, VENDOR_SECRET);
    await waitFor(
      "the pool's pods given the vendor, the old ones gone",
      async () => {
        const pods = await allPodsOf(poolWith);
        return pods.length > 0 && pods.every((p) => podReady(p) && secretsOf(p).includes(VENDOR_SECRET));
      },
      { timeoutMs: 3 * 60_000, intervalMs: 1000 },
    ).catch(explained);

    // A new user's work, through the gateway: 5 asynchronous generations and 3 simulations.
    vendor.slow('agents');
    vendor.slow('others');
    const entrance = entrances[0]!;
    const client = entrance.newClient();
    const signIn = await entrance.request('/api/v1/auth/demo', client, { body: {} });
    assert.equal(signIn.status, 201, signIn.body);
    const auth = { authorization: `Bearer ${signIn.json<{ access_token: string }>().access_token}` };
    const send = (path: string, options: Parameters<Entrance['request']>[2] = {}) =>
      entrance.request(path, client, { ...options, headers: { ...auth, ...options.headers } });
    const balance = async () => ok(await send('/api/v1/credits/balance'), 'balance').json<{ balance: number }>().balance;
    const before = await balance();
    const submit = async (path: string, body: unknown) => {
      const answer = await send(path, { body, headers: { 'idempotency-key': randomUUID() } });
      assert.equal(answer.status, 202, `${path}: ${answer.status} ${answer.body.slice(0, 500)}`);
      const charged = Number(answer.headers['x-credits-charged']);
      assert.ok(charged > 0, `${path} charged ${charged}`);
      const { job_id, id } = answer.json<{ job_id?: string; id?: string }>();
      return { id: (job_id ?? id)!, charged };
    };
    const jobs: { id: string; charged: number }[] = [];
    const queries = ['Kitty Hawk, 1903', 'Magellan reaches the Pacific, 1520', 'The Rosetta Stone found, 1799', 'Curie isolates radium, 1902', 'Morse, 1844'];
    // The aggregator's model by name: refused (422) where the generation pod has no aggregator.
    for (const query of queries) jobs.push(await submit('/api/v1/timepoints/generate', { query, text_model: 'google/gemini-2.5-flash' }));
    const runs: { id: string; charged: number }[] = [];
    for (let i = 0; i < 3; i++) runs.push(await submit('/api/v1/simulate', { template: 'athens-war-council', fidelity: 1, mechanisms: [] }));

    type Job = { status: string; timepoint_id: string | null; finished_at: string | null; error: unknown };
    type Run = { status: string; progress: { steps_done: number; steps_total: number; percent: number }; finished_at: string | null };
    const jobOf = async (id: string) => ok(await send(`/api/v1/timepoints/jobs/${id}`), `job ${id}`).json<Job>();
    const ENDED = ['completed', 'failed', 'stopped', 'cancelled'];
    // One read of the user's runs and one per job: within the user's rate limit at a look every 3 s.
    let last: { jobs: Job[]; runs: (Run & { id: string })[] } = { jobs: [], runs: [] };
    const look = async () => {
      const listed = ok(await send('/api/v1/simulations?limit=10'), 'runs').json<{ items: (Run & { id: string })[] }>().items;
      last = { jobs: await Promise.all(jobs.map((j) => jobOf(j.id))), runs: runs.map((r) => listed.find((l) => l.id === r.id)!) };
      return last;
    };
    const unfinished = async () => {
      const now = await look();
      return { jobs: now.jobs.filter((j) => !ENDED.includes(j.status)).length, runs: now.runs.filter((r) => !ENDED.includes(r.status)).length };
    };
    /** Rethrows a failed wait with the work's states and the vendor's counts. */
    const stated = (err: unknown) =>
      explained(
        `${String(err)}\njobs: ${JSON.stringify(last.jobs.map((j) => [j.status, j.error]))}\nruns: ${JSON.stringify(last.runs.map((r) => [r?.status, r?.progress]))}` +
          `\nvendor: answered ${JSON.stringify(vendor!.answered)}, waiting ${JSON.stringify(vendor!.waiting)}, abandoned ${JSON.stringify(vendor!.abandoned)}`,
      );
    // Under way: every job and run running, waiting on the vendor.
    await waitFor(
      'every job and run running, waiting on the model',
      async () => {
        const now = await look();
        return [...now.jobs, ...now.runs].every((s) => s?.status === 'running') && vendor!.waiting.agents > 0 && vendor!.waiting.others > 0;
      },
      { timeoutMs: 2 * 60_000, intervalMs: 3000 },
    ).catch(stated);

    // Roll back to the previous tag (what `helm rollback` does to the images). Each stopping pod's SIGTERM is
    // seen when it stops answering (its preStop sleep keeps it serving until then); the vendor is made fast
    // then, so what runs there may finish in its grace or be handed back.
    const owner = await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY);
    const serviceOf = async (name: string) => {
      const [pod] = (await podsOf(owner)).filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] === name);
      const port = (pod!.spec as { containers: { ports: { name: string; containerPort: number }[] }[] }).containers[0]!.ports.find((p) => p.name === 'http')!;
      return { name: pod!.metadata.name, health: `http://${podStatus(pod!).podIP}:${port.containerPort}/health` };
    };
    const [oldGeneration, oldSimulation] = [await serviceOf('generation'), await serviceOf('simulation')];
    const answering = async (url: string) => (await call(url, { timeoutMs: 1000 }).catch(() => undefined))?.status === 200;
    /** Resolves when the pod stops answering (SIGTERM), with what was unfinished then; `gone` when the pod is deleted. */
    const stopping = async (pod: { name: string; health: string }, caller: 'agents' | 'others') => {
      await waitFor(`${pod.name} stopping`, async () => !(await answering(pod.health)), { timeoutMs: 10 * 60_000, intervalMs: 250 });
      const atSigterm = await unfinished();
      vendor!.fast(caller);
      await waitFor(`${pod.name} gone`, async () => !(await admin().list(R.Pod, {}, NAMESPACE)).items.some((p) => p.metadata.name === pod.name), {
        timeoutMs: 3 * 60_000,
        intervalMs: 500,
      });
      return { atSigterm, gone: Date.now() };
    };
    const generationStopped = stopping(oldGeneration, 'agents');
    const simulationStopped = stopping(oldSimulation, 'others');
    // Awaited below, after the rollout: a failure meanwhile is not unhandled.
    for (const watch of [generationStopped, simulationStopped]) watch.catch(() => undefined);
    const seconds = await rollOut(gatewayResource(GATEWAY, TAG, withVendor), TAG, VENDOR_SECRET);
    const [generationStop, simulationStop] = await Promise.all([generationStopped, simulationStopped]);

    const ended = await waitFor(
      'every job and run ended',
      async () => {
        const now = await look();
        return [...now.jobs, ...now.runs].every((s) => s && ENDED.includes(s.status)) ? now : undefined;
      },
      { timeoutMs: 6 * 60_000, intervalMs: 3000 },
    ).catch(stated);
    const drained = ended.jobs.filter((j) => j.finished_at && Date.parse(j.finished_at) < generationStop.gone).length;
    console.log(
      `      rolled back in ${seconds.toFixed(0)} s; in flight at SIGTERM: ${generationStop.atSigterm.jobs}/5 generations, ` +
        `${simulationStop.atSigterm.runs}/3 simulations; ${drained} generations finished before the stopping pod was gone; ` +
        `${vendor.abandoned.others} simulation model calls cut by the stopping pod`,
    );
    // Really in flight when the old pods were told to stop.
    assert.ok(generationStop.atSigterm.jobs >= 1, `generations unfinished at the generation pod's SIGTERM: ${generationStop.atSigterm.jobs}`);
    assert.ok(simulationStop.atSigterm.runs >= 1, `runs unfinished at the simulation pod's SIGTERM: ${simulationStop.atSigterm.runs}`);

    // Each completed once: one scene per job, every run's steps done once, nothing else running.
    for (const job of ended.jobs) assert.equal(job.status, 'completed', JSON.stringify(job).slice(0, 500));
    const scenes = ended.jobs.map((j) => j.timepoint_id!);
    assert.equal(new Set(scenes).size, 5, `scenes: ${scenes.join(', ')}`);
    for (const scene of scenes) ok(await send(`/api/v1/timepoints/${scene}`), `scene ${scene}`);
    for (const run of ended.runs) {
      assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
      assert.equal(run.progress.steps_done, run.progress.steps_total);
      assert.equal(run.progress.percent, 100);
    }
    const listed = ok(await send('/api/v1/simulations?limit=10'), 'runs').json<{ items: { id: string }[] }>().items;
    assert.deepEqual(listed.map((r) => r.id).sort(), runs.map((r) => r.id).sort());

    // Charged once each: the ledger holds the 8 charges, no refund, and the balance is what they leave.
    const charges = [...jobs, ...runs].map((w) => w.charged);
    assert.equal(await balance(), before - charges.reduce((a, b) => a + b, 0));
    const entries = ok(await send('/api/v1/credits/history?limit=50'), 'history').json<{ items: { amount: number; refund_of: string | null }[] }>().items;
    assert.deepEqual(
      entries.filter((e) => e.refund_of !== null),
      [],
    );
    assert.deepEqual(
      entries
        .filter((e) => e.amount < 0)
        .map((e) => -e.amount)
        .sort((a, b) => a - b),
      charges.sort((a, b) => a - b),
    );
  });

  it('deletes an account with data in every service and a paid plan: the report names each, and nothing of it is left', async function () {
    this.timeout(5 * 60_000);
    const stripe = platform!.stripe;
    // A paid plan on top of the pack, scene, run and conversation of the tests above.
    const checkout = await asFirstUser('/api/v1/billing/checkout', { body: { kind: 'plan', id: 'pro' } });
    assert.equal(checkout.status, 201, checkout.body.slice(0, 500));
    const paid = await stripe.pay(checkout.json<{ id: string }>().id);
    const subscription = String((paid.find((e) => e.type === 'customer.subscription.created')!.data.object as { id: string }).id);
    await waitFor('the plan applied', async () => ok(await asFirstUser('/api/v1/auth/me'), 'me').json<{ tier: string }>().tier === 'pro', {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const userId = ok(await asFirstUser('/api/v1/auth/me'), 'me').json<{ id: string }>().id;

    const deleted = await asFirstUser('/api/v1/auth/me', { method: 'DELETE', timeoutMs: 120_000 });
    assert.equal(deleted.status, 200, deleted.body.slice(0, 1000));
    type Part = { status: string; deleted: Record<string, number>; kept: Record<string, { count: number }>; notes: string[] };
    const report = deleted.json<{ status: string; services: Record<string, Part> }>();
    assert.equal(report.status, 'completed');
    assert.deepEqual(Object.keys(report.services).sort(), ['billing', 'conductor', 'gateway', 'generation', 'graph', 'simulation']);
    assert.ok(report.services.generation!.deleted.timepoints! >= 1, JSON.stringify(report.services.generation));
    assert.ok(report.services.simulation!.deleted.runs! >= 1, JSON.stringify(report.services.simulation));
    assert.ok(report.services.conductor!.deleted.conversations! >= 1, JSON.stringify(report.services.conductor));
    assert.ok(report.services.billing!.kept.payments!.count >= 2, JSON.stringify(report.services.billing));
    // The plan is cancelled at Stripe, so the deleted person is never charged again.
    await waitFor(
      'Stripe told of the cancelled plan',
      async () => stripe.events.some((e) => e.type === 'customer.subscription.deleted' && (e.data.object as { id: string }).id === subscription),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // Every credential stops: at once on the replica that deleted, on the other within its AUTH_CACHE_MS (1 s).
    await waitFor(
      'every credential stops on both gateway replicas',
      async () => {
        const answers = await Promise.all([0, 1, 2, 3].map(() => asFirstUser('/api/v1/auth/me')));
        return answers.every((answer) => answer.status === 401);
      },
      { timeoutMs: 5_000, intervalMs: 500 },
    );

    // Nothing left: each service's own export of the user, read with the service key on its pod's Service.
    for (const service of DEPLOYED_SERVICES.filter((name) => name !== 'gateway')) {
      const svc = await admin().get(R.Service, NAMESPACE, `${GATEWAY}-${service}`);
      const spec = svc.spec as { clusterIP: string; ports: { port: number }[] };
      let cursor: string | null | undefined;
      const left: unknown[] = [];
      do {
        const page = ok(
          await call(`http://${spec.clusterIP}:${spec.ports[0]!.port}/api/v1/users/${userId}/data${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`, {
            headers: { 'x-service-key': KEYS.SERVICE_KEY },
          }),
          `${service} export`,
        ).json<{ items: unknown[]; next_cursor: string | null }>();
        left.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      if (service === 'billing')
        assert.ok(
          left.every((item) => !JSON.stringify(item).includes(userId)),
          'billing keeps payments anonymised only',
        );
      else assert.deepEqual(left, [], `${service} holds nothing of the user`);
    }
  });

  it('deletes everything the TemporaGateway owned when it is deleted', async function () {
    this.timeout(5 * 60_000);
    const owner = await admin().get(R.TemporaGateway, NAMESPACE, GATEWAY);
    const types = [R.Deployment, ReplicaSet, R.Service, R.ConfigMap, R.Secret, R.PodDisruptionBudget];
    const owned = async () => {
      const names: string[] = [];
      for (const type of types) {
        for (const o of (await admin().list(type, {}, NAMESPACE)).items) {
          if (o.metadata.ownerReferences?.some((r) => r.uid === owner.metadata.uid)) names.push(`${type.kind}/${o.metadata.name}`);
        }
      }
      for (const p of (await admin().list(R.Pod, { labelSelector: `tempora.dev/owner-uid=${owner.metadata.uid}` }, NAMESPACE)).items)
        names.push(`Pod/${p.metadata.name}`);
      return names;
    };
    const before = await owned();
    for (const kind of ['Deployment', 'Service', 'ConfigMap', 'Secret', 'PodDisruptionBudget', 'Pod'])
      assert.ok(
        before.some((n) => n.startsWith(`${kind}/`)),
        `${kind} owned before: ${before.join(', ')}`,
      );
    await admin().delete(R.TemporaGateway, NAMESPACE, GATEWAY);
    await waitFor('nothing the TemporaGateway owned left', async () => (await owned()).length === 0, { timeoutMs: 4 * 60_000, intervalMs: 1000 }).catch(
      async (err: unknown) => {
        throw new Error(`${String(err)}; left: ${(await owned()).join(', ')}`);
      },
    );
    // Its workers and pool stay, saying why they run nothing.
    const pool = await waitFor(
      'the pool says its TemporaGateway is gone',
      async () => {
        const p = await admin().get(R.AgentPool, NAMESPACE, POOL);
        return condition(p, 'Ready')?.reason === 'GatewayNotFound' ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    assert.equal(condition(pool, 'Ready')?.status, 'False');
  });
});
