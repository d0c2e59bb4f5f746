/**
 * `npm run bench`: the graph service's traverse and path at scale, through HTTP, beside a recursive-CTE
 * baseline on the same database and igraph (Python, from PyPI) on the same edges.
 *
 *   BENCH_MOMENTS (default 1,000,000), BENCH_EDGES_PER_MOMENT (default 10), BENCH_SAMPLES (default 300),
 *   BENCH_HTTP_SECONDS (default 5 per HTTP row)
 *
 * Uses DATABASE_URL / REDIS_URL when set, otherwise starts PostgreSQL and Redis like `npm test`.
 */
import { type ChildProcess, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import pg from 'pg';
import { Agent, request } from 'undici';
import { startInfra } from '../../scripts/infra.ts';
import { IndexBuilder } from '../../services/graph/src/domain/adjacency-index.ts';
import { CAUSAL_TYPES, PATH_DEFAULT_TYPES } from '../../services/graph/src/domain/edge-types.ts';
import { shortestPath, traverse } from '../../services/graph/src/domain/graph-search.ts';
import { migrations } from '../../services/graph/src/migrations.ts';
import { GraphRepository } from '../../services/graph/src/repository/index.ts';
import { createDatabase } from '../../test/support/database.ts';
import { launch, serviceListening, shownAt } from '../../test/support/platform.ts';
import { ensureCommands, type WrkFigures, wrk } from '../support/wrk.ts';
import { generateGraph } from './generate.ts';

const MOMENTS = Number(process.env.BENCH_MOMENTS ?? 1_000_000);
const PER_MOMENT = Number(process.env.BENCH_EDGES_PER_MOMENT ?? 10);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 300);
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 5);
const CTE_SAMPLES = 20;
const SERVICE_KEY = 'bench-service-key';
const here = fileURLToPath(new URL('.', import.meta.url));

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);

ensureCommands([['wrk', 'wrk']]);
const infra = await startInfra();
Object.assign(process.env, infra.env);
const work = mkdtempSync(join(tmpdir(), 'tempora-bench-'));
let service: ChildProcess | undefined;
try {
  const databaseUrl = await createDatabase('bench');
  const logger = createLogger('bench', 'warn');
  const database = await openDatabase({ service: 'graph', url: databaseUrl, dataDir: work, migrations, logger, pool: { min: 1, max: 4 } });
  let started = performance.now();
  step(`generating ${MOMENTS.toLocaleString()} moments and ${(MOMENTS * PER_MOMENT).toLocaleString()} edges`);
  await generateGraph(database.knex, MOMENTS, PER_MOMENT);
  const loadSeconds = (performance.now() - started) / 1000;
  const edgeCount = Number((await database.knex('edges').count({ c: '*' }))[0]!.c);

  const sample = async (n: number, offset = 0) =>
    (
      (await database.knex.raw('select id, path from moments order by hashint4(id::int) limit ? offset ?', [n, offset])) as {
        rows: Array<{ id: string; path: string }>;
      }
    ).rows;
  const anchors = await sample(SAMPLES);
  const pairs = anchors.map((anchor, index) => [anchor, anchors[(index * 7 + 3) % anchors.length]!] as const);
  // A running service is JIT-warm: each HTTP row starts after a round over other moments.
  const warmAnchors = await sample(SAMPLES, SAMPLES);
  const warmPairs = warmAnchors.map((anchor, index) => [anchor, warmAnchors[(index * 7 + 3) % warmAnchors.length]!] as const);

  step('starting the graph service and loading its index');
  started = performance.now();
  const launched = launch(
    join(here, '../../services/graph/src/main.ts'),
    [],
    {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      SERVICE_KEY,
      GRAPH_SEED: 'false',
      // Its "listening" line (info) says which ports it bound; only warnings are printed.
      LOG_LEVEL: 'info',
      OTEL_SDK_DISABLED: 'true',
      RATE_LIMIT_READ_PER_MINUTE: '100000000',
    },
    serviceListening('graph'),
    shownAt('warn', (line) => console.log(line)),
  );
  service = launched.child;
  const { url: base, metricsUrl } = await launched.announced;
  for (;;) {
    const health = await fetch(`${base}/health`).then(
      (r) => r.json() as Promise<{ index?: string }>,
      () => undefined,
    );
    if (health?.index === 'loaded') break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const indexSeconds = (performance.now() - started) / 1000;
  const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
  const indexBytes = Number(/graph_index_memory_bytes\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
  const nodeStoreBytes = Number(/graph_node_store_memory_bytes\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
  const rssBytes = Number(/process_resident_memory_bytes\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);

  const keepAlive = new Agent({ connections: 1 });
  const get = async (url: string) => {
    const response = await request(`${base}${url}`, { headers: { 'X-Service-Key': SERVICE_KEY }, dispatcher: keepAlive });
    const body = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`${url}: ${response.statusCode}`);
    return body;
  };
  // Sequential requests on one keep-alive connection, the moments in turn, after a warm-up round over
  // other moments (a running service is JIT-warm).
  const timeHttp = (paths: string[], warmup: string[]): WrkFigures => {
    const run = (list: string[], seconds: number) => {
      const figures = wrk({ url: base, headers: { 'X-Service-Key': SERVICE_KEY }, seconds, connections: 1, paths: list });
      if (figures.total === 0 || figures.errors > 0 || figures.non2xx > 0) throw new Error(`wrk over ${list[0]}…: ${JSON.stringify(figures)}`);
      return figures;
    };
    run(warmup, 1);
    return run(paths, HTTP_SECONDS);
  };
  const found = async (urls: string[]) => {
    let hits = 0;
    for (const url of urls.slice(0, 50)) hits += (JSON.parse(await get(url)) as { found: boolean }).found ? 1 : 0;
    return hits / Math.min(50, urls.length);
  };

  step('timing HTTP traverse and path');
  const traverseUrls = (depth: number, list: typeof anchors) => list.map((a) => `/api/v1/graph/traverse${a.path}?depth=${depth}`);
  const pathUrls = (hops: number, list: typeof pairs) => list.map(([a, b]) => `/api/v1/graph/path?from=${a.path}&to=${b.path}&max_hops=${hops}`);
  const http = {
    traverse2: timeHttp(traverseUrls(2, anchors), traverseUrls(2, warmAnchors)),
    traverse4: timeHttp(traverseUrls(4, anchors), traverseUrls(4, warmAnchors)),
    path6: timeHttp(pathUrls(6, pairs), pathUrls(6, warmPairs)),
    path10: timeHttp(pathUrls(10, pairs), pathUrls(10, warmPairs)),
  };
  const foundShare = await found(pathUrls(6, pairs));

  step('timing the same algorithms in-process over an index built here (no HTTP, no node details)');
  const repository = new GraphRepository(database.knex);
  const builder = new IndexBuilder();
  const { hidden, maxNode } = await repository.adjacency.loadEdges(builder);
  const index = builder.freeze(hidden, maxNode);
  // Warm like the service (and igraph, which is compiled): a round over other moments first.
  const timeLocal = async (run: (index: number, warm: boolean) => Promise<unknown>) => {
    for (let i = 0; i < warmAnchors.length; i += 1) await run(i, true);
    const times: number[] = [];
    for (let i = 0; i < anchors.length; i += 1) {
      const t = performance.now();
      await run(i, false);
      times.push(performance.now() - t);
    }
    return times;
  };
  const idOf = (value: { id: string }) => Number(value.id);
  const local = {
    traverse2: await timeLocal((i, warm) =>
      traverse(index, idOf((warm ? warmAnchors : anchors)[i]!), { direction: 'both', depth: 2, types: CAUSAL_TYPES, limit: 100, minWeight: 0 }),
    ),
    traverse4: await timeLocal((i, warm) =>
      traverse(index, idOf((warm ? warmAnchors : anchors)[i]!), { direction: 'both', depth: 4, types: CAUSAL_TYPES, limit: 100, minWeight: 0 }),
    ),
    path6: await timeLocal((i, warm) => {
      const [a, b] = (warm ? warmPairs : pairs)[i]!;
      return shortestPath(index, idOf(a), idOf(b), { maxHops: 6, types: PATH_DEFAULT_TYPES });
    }),
    path10: await timeLocal((i, warm) => {
      const [a, b] = (warm ? warmPairs : pairs)[i]!;
      return shortestPath(index, idOf(a), idOf(b), { maxHops: 10, types: PATH_DEFAULT_TYPES });
    }),
  };

  step('timing the recursive-CTE baseline');
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`set statement_timeout = '20s'`);
  const causal = `('causes','caused_by','precedes','follows','influences')`;
  // The same answer as the service's traversal, in one statement: the direction table for direction=both
  // over the causal types is "either direction", BFS levels from the anchor, the first 100 moments by
  // level with their fields, and every followed edge among them with its theme and description.
  const traverseCte = (depth: number) => `
    with recursive walk(id, hop) as (
      select $1::bigint, 0
      union
      select case when e.source_id = w.id then e.target_id else e.source_id end, w.hop + 1
      from walk w join edges e on (e.source_id = w.id or e.target_id = w.id) and e.type in ${causal}
      where w.hop < ${depth}
    ),
    reached as (select id, min(hop) as hop from walk group by id order by min(hop), id limit 100)
    select
      (select json_agg(json_build_object('id', m.path, 'name', m.event_name, 'year', m.year, 'month_num', m.month_num, 'day', m.day,
         'era', m.era, 'type', m.type, 'layer', m.layer, 'country', m.country, 'region', m.region, 'city', m.city,
         'latitude', m.latitude, 'longitude', m.longitude, 'confidence', m.confidence, 'status', m.status, 'hop', r.hop) order by r.hop)
       from reached r join moments m on m.id = r.id) as nodes,
      (select json_agg(json_build_object('source', s.path, 'target', t.path, 'type', e.type, 'weight', e.weight, 'theme', e.theme, 'description', e.description))
       from edges e join reached a on a.id = e.source_id join reached b on b.id = e.target_id
       join moments s on s.id = e.source_id join moments t on t.id = e.target_id
       where e.type in ${causal}) as edges`;
  const pathCte = (maxHops: number) => `
    with recursive walk(id, hop, trail) as (
      select $1::bigint, 0, array[$1::bigint]
      union all
      select n.id, w.hop + 1, w.trail || n.id
      from walk w
      join lateral (select case when e.source_id = w.id then e.target_id else e.source_id end as id
                    from edges e where (e.source_id = w.id or e.target_id = w.id) and e.type <> 'challenges') n on true
      where w.hop < ${maxHops} and not n.id = any(w.trail) and not exists (select 1 from walk x where x.id = $2::bigint)
    )
    select trail from walk where id = $2::bigint order by hop limit 1`;
  const timeSql = async (sql: string, params: Array<Array<string | number>>) => {
    const times: number[] = [];
    let timeouts = 0;
    for (const args of params) {
      const t = performance.now();
      try {
        await client.query(sql, args);
        times.push(performance.now() - t);
      } catch {
        timeouts += 1;
        times.push(Number.POSITIVE_INFINITY);
      }
    }
    return { times, timeouts };
  };
  const cteAnchors = anchors.slice(0, CTE_SAMPLES).map((a) => [a.id]);
  const ctePairs = pairs.slice(0, 5).map(([a, b]) => [a.id, b.id]);
  const cte = {
    traverse2: await timeSql(traverseCte(2), cteAnchors),
    traverse4: await timeSql(traverseCte(4), cteAnchors.slice(0, 5)),
    path6: await timeSql(pathCte(6), ctePairs),
  };
  await client.end();

  step('exporting edges for igraph');
  const edgesFile = join(work, 'edges.csv');
  const queriesFile = join(work, 'queries.json');
  execFileSync('psql', [databaseUrl, '-qc', `\\copy (select source_id, target_id, type from edges) to '${edgesFile}' csv`]);
  writeFileSync(queriesFile, JSON.stringify({ anchors: anchors.map((a) => Number(a.id)), pairs: pairs.map(([a, b]) => [Number(a.id), Number(b.id)]) }));
  let igraph: Record<string, number[]> | undefined;
  try {
    if (spawnSync('python3', ['-c', 'import igraph']).status !== 0) execFileSync('python3', ['-m', 'pip', 'install', '-q', 'igraph'], { stdio: 'inherit' });
    igraph = JSON.parse(
      execFileSync('python3', [join(here, 'igraph_peer.py'), edgesFile, queriesFile], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }),
    ) as Record<string, number[]>;
  } catch (error) {
    step(`igraph unavailable (pip install igraph): ${(error as Error).message.split('\n')[0]}`);
  }

  const row = (name: string, ours: WrkFigures, inProcess: number[], cteTimes?: { times: number[]; timeouts: number }, peer?: number[]) => {
    const p50 = ours.p50;
    const local50 = percentile(inProcess, 50);
    const cte50 = cteTimes ? percentile(cteTimes.times, 50) : Number.NaN;
    const peer50 = peer ? percentile(peer, 50) : Number.NaN;
    const cteCell = cteTimes ? `${ms(cte50)}${cteTimes.timeouts ? ` (${cteTimes.timeouts}/${cteTimes.times.length} over 20 s)` : ''}` : 'not run';
    const ratio = Number.isFinite(cte50) ? `${(cte50 / p50).toFixed(0)}×` : cteTimes ? '> 20 s' : 'n/a';
    return `| ${name} | ${ms(p50)} | ${ms(ours.p99)} | ${cteCell} | ${ratio} | ${ms(local50)} | ${ms(peer50)} | ${Number.isFinite(peer50) ? `${(local50 / peer50).toFixed(local50 / peer50 < 0.1 ? 2 : 1)}×` : 'n/a'} |`;
  };
  const report = [
    `Graph: ${MOMENTS.toLocaleString()} moments, ${edgeCount.toLocaleString()} edges (generated in ${loadSeconds.toFixed(0)} s); index loaded in ${indexSeconds.toFixed(1)} s,`,
    `index memory ${(indexBytes / 1048576).toFixed(0)} MiB (${(indexBytes / Math.max(1, edgeCount)).toFixed(1)} bytes per edge), node store ${(nodeStoreBytes / 1048576).toFixed(0)} MiB, service RSS ${(rssBytes / 1048576).toFixed(0)} MiB; HTTP: ${SAMPLES} moments in turn for ${HTTP_SECONDS} s per row (${http.traverse2.total.toLocaleString()} traversals at depth 2); paths found within 6 hops: ${(foundShare * 100).toFixed(0)}%.`,
    '',
    '| query | HTTP p50 ms | HTTP p99 ms | recursive CTE p50 ms | CTE / HTTP | index in-process p50 ms | igraph p50 ms | index / igraph |',
    '|---|---|---|---|---|---|---|---|',
    row('traverse depth 2 (limit 100)', http.traverse2, local.traverse2, cte.traverse2, igraph?.traverse2),
    row('traverse depth 4 (limit 100)', http.traverse4, local.traverse4, cte.traverse4, igraph?.traverse4),
    row('path max_hops 6', http.path6, local.path6, cte.path6, igraph?.path),
    row('path max_hops 10', http.path10, local.path10, undefined, igraph?.path),
  ].join('\n');
  console.log(`\n${report}\n`);
  await database.close();
} finally {
  service?.kill('SIGTERM');
  await infra.stop();
}
