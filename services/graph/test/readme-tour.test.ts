import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Reply, request } from '../../../test/support/http.ts';
import { FakeGeneration } from '../../../test/support/stand-ins/generation.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { type GraphHarness, SERVICE_KEY, startGraph, WRITER_TOKEN } from './harness.ts';

/**
 * The graph examples of the README's "A five-minute tour", read from the README itself and run as written
 * (curl's flags, headers, bodies and files) against a seeded graph service that renders in process, as
 * under `npm start`. Each example has a check of what the README says it shows; an example without a
 * check, or a check whose example is gone, fails the test, so the two cannot drift apart.
 */

const README = fileURLToPath(new URL('../../../README.md', import.meta.url));

interface Curl {
  /** The command as written in the README (continuations joined), for messages. */
  line: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  data?: string;
  /** `> file`: where the README keeps the answer for a later example. */
  output?: string;
}

/**
 * The lines of the first sh block after the tour's heading: continuations joined, comments and shell
 * function definitions (the README's `field` helper, whose work the test does itself) dropped.
 */
function tourLines(markdown: string): string[] {
  const section = markdown.slice(markdown.indexOf('## A five-minute tour'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'the tour has an sh block');
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map(stripComment)
    .filter((line) => line && !/^\w+\(\)\s*\{/.test(line));
}

/** What `field NAME…` prints of an answer: the values at dotted paths, which must exist, space-separated. */
function field(body: unknown, names: string): string {
  return names
    .split(/\s+/)
    .map((name) => {
      const value = name.split('.').reduce<unknown>((object, key) => (object as Record<string, unknown> | undefined)?.[key], body);
      assert.ok(value !== undefined, `the answer has no ${name}: ${JSON.stringify(body)}`);
      return String(value);
    })
    .join(' ');
}

/**
 * The command of a tour line: a `for … do [S=$(]COMMAND[)]; …; done [| uniq]` loop, which watches an
 * answer change, stands for its COMMAND (the check asks again itself), and a leading `sleep S;` is dropped
 * (the check waits for what the README waits for).
 */
function commandOf(line: string): string {
  const loop = /^for .+?; do (?:[A-Z]+=\$\()?(curl .+?)\)?; .*done(?:\s*\|\s*uniq)?$/.exec(line);
  if (loop) return loop[1]!;
  return line.replace(/^sleep [\d.]+;\s*/, '');
}

/** A line without its `# comment` (a # that starts a word outside quotes). */
function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i).trim();
  }
  return line.trim();
}

/** Shell words: single quotes literal, double quotes and bare words with $VARIABLES expanded. */
function words(text: string, variables: Record<string, string>): string[] {
  const result: string[] = [];
  const expand = (value: string) => value.replace(/\$([A-Z]+)/g, (_, name: string) => variables[name] ?? assert.fail(`$${name} is not set in the tour`));
  for (const match of text.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    if (match[1] !== undefined) result.push(match[1]);
    else result.push(expand(match[2] ?? match[3]!));
  }
  return result;
}

function parseCurl(line: string, variables: Record<string, string>): Curl {
  const args = words(line, variables);
  assert.equal(args.shift(), 'curl', line);
  const curl: Curl = { line, method: 'GET', url: '', headers: {} };
  while (args.length > 0) {
    const arg = args.shift()!;
    if (arg === '-H') {
      const [name, ...value] = args.shift()!.split(':');
      curl.headers[name!.trim().toLowerCase()] = value.join(':').trim();
    } else if (arg === '-d' || arg === '--data') {
      curl.data = args.shift()!;
      curl.method = 'POST';
    } else if (arg === '-X') curl.method = args.shift()!;
    else if (arg === '>') curl.output = args.shift()!;
    else if (/^-[siN]+$/.test(arg)) continue;
    else if (!curl.url) curl.url = arg;
    else assert.fail(`unexpected curl argument ${arg} in: ${line}`);
  }
  return curl;
}

describe('README tour: the graph examples return what they promise', function () {
  this.timeout(120_000);
  const generation = new FakeGeneration();
  let h: GraphHarness;
  before(async () => {
    await generation.start();
    // Every worker in process, as under `npm start`.
    h = await startGraph({ GRAPH_SEED: 'true', GRAPH_WORKERS: 'renderer,expander,judge,daily', GENERATION_URL: generation.url, WORKER_POLL_MS: '50' });
  });
  after(async () => {
    await h?.stop();
    await generation.stop();
  });

  it('runs each example and checks its answer', async () => {
    // The tour's address and keys are npm start's; the test service has its own.
    const local: Record<string, string> = { G: h.url, K: `X-Service-Key: ${SERVICE_KEY}`, W: `Authorization: Bearer ${WRITER_TOKEN}` };
    const variables: Record<string, string> = {};
    const files = new Map<string, string>();
    let lastJob: string | undefined;

    const run = async (curl: Curl): Promise<Reply> => {
      const url = new URL(curl.url);
      const raw = curl.data?.startsWith('@') ? (files.get(curl.data.slice(1)) ?? assert.fail(`${curl.data} was not written by an earlier example`)) : curl.data;
      return request(h.url, url.pathname + url.search, { method: curl.method, headers: curl.headers, ...(raw !== undefined ? { raw } : {}) });
    };

    const bastille = '/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
    // `optional`: a check for an example the README may show or leave out.
    /** Asks `curl` again until `done` holds of what `field` prints (or 20 s pass); every distinct value printed, in order. */
    const watch = async (curl: Curl, names: string, done: (printed: string) => boolean): Promise<string[]> => {
      const seen: string[] = [];
      const deadline = Date.now() + 20_000;
      for (;;) {
        const printed = field((await run(curl)).body, names);
        if (seen.at(-1) !== printed) seen.push(printed);
        if (done(printed) || Date.now() > deadline) return seen;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    const lifecycle = '/1900/july/19/1300/france/ile-de-france/paris/paris-metro-line-1-opens';
    const spam = '/2024/may/1/1200/unknown/unknown/unknown/buy-now-casino-bonus';
    let piped: string | undefined;

    const checks: Array<{
      example: string;
      optional?: true;
      matches: (curl: Curl, url: URL) => boolean;
      check: (reply: Reply, curl: Curl) => Promise<void> | void;
    }> = [
      {
        example: 'stats',
        matches: (_, url) => url.pathname === '/api/v1/stats',
        check: ({ body }) => {
          assert.ok(body.total_nodes >= 987 && body.total_edges > 1254, JSON.stringify(body));
          assert.ok(body.date_range.min_year <= -15000 && body.date_range.max_year >= 2024);
        },
      },
      {
        example: 'full-text search for the moon landing',
        matches: (_, url) => url.pathname === '/api/v1/moments' && url.searchParams.get('q') === 'moon landing',
        check: ({ body }) => {
          assert.ok(body.items.length > 0 && body.items.length <= 3);
          assert.match(body.items[0].path, /\/1969\/july\/20\/.*apollo-11-moon-landing$/);
        },
      },
      {
        example: 'moments of Napoleon, by year',
        matches: (_, url) => url.pathname === '/api/v1/moments' && url.searchParams.has('entity'),
        check: ({ body }) => {
          assert.ok(body.total >= 8, `${body.total} moments of Napoleon`);
          for (const item of body.items)
            assert.ok(
              item.figures.some((figure: string) => figure.includes('Napoleon')),
              item.path,
            );
          const years = body.items.map((item: { year: number }) => item.year);
          assert.deepEqual(
            years,
            [...years].sort((a, b) => a - b),
          );
        },
      },
      {
        example: 'the Bastille with its edges',
        matches: (curl, url) => url.pathname === `/api/v1/moments${bastille}` && !url.search && !curl.output,
        check: ({ body }) => {
          assert.equal(body.path, bastille);
          assert.match(body.event_name, /Bastille/);
          assert.ok(body.edge_count > 0 && body.edges.length === body.edge_count);
        },
      },
      {
        example: 'what the Bastille led to, two hops into the future',
        matches: (_, url) => url.pathname === `/api/v1/graph/traverse${bastille}`,
        check: ({ body }) => {
          assert.equal(body.anchor, bastille);
          assert.equal(body.direction, 'future');
          assert.ok(
            body.nodes.some((node: { hop: number }) => node.hop === 1) && body.nodes.some((node: { hop: number }) => node.hop === 2),
            'one and two hops away',
          );
          assert.ok(
            body.nodes.every((node: { year: number }) => node.year >= 1789),
            'the future of 1789',
          );
        },
      },
      {
        example: 'the shortest chain from the Bastille to Waterloo',
        matches: (_, url) => url.pathname === '/api/v1/graph/path',
        check: ({ body }) => {
          assert.equal(body.found, true);
          assert.ok(body.hops >= 1 && body.hops <= 6);
          assert.equal(body.nodes[0].id, bastille);
          assert.match(body.nodes.at(-1).id, /battle-of-waterloo$/);
        },
      },
      {
        example: '1969 by month',
        matches: (_, url) => url.pathname === '/browse',
        check: ({ body }) => {
          assert.equal(body.segment, 'month');
          assert.ok(body.children.some((child: { segment: string; count: number }) => child.segment === 'july' && child.count > 0));
        },
      },
      {
        example: 'today in history, 20 July',
        matches: (_, url) => url.pathname === '/today' && url.searchParams.has('month'),
        check: ({ body }) => {
          assert.ok(body.items.length > 0);
          assert.ok(body.items.every((item: { month: string; day: number }) => item.month === 'july' && item.day === 20));
          assert.ok(body.items.some((item: { path: string }) => item.path.endsWith('apollo-11-moon-landing')));
        },
      },
      {
        example: "today's date, with the Daily job's entries",
        optional: true,
        matches: (_, url) => url.pathname === '/today' && !url.searchParams.has('month'),
        check: async (_reply, curl) => {
          // Daily runs as the service starts; its entries are public once the Judge has passed them.
          const daily = await waitFor(
            'the Daily entries',
            async () => {
              const entries: Array<{ status: string }> = (await run(curl)).body.items.filter((item: { source_type: string }) => item.source_type === 'daily');
              return entries.length > 0 && entries;
            },
            { timeoutMs: 20_000 },
          );
          assert.ok(
            daily.every((item) => item.status === 'active'),
            'the Daily entries, passed',
          );
        },
      },
      {
        example: 'the Bastille exported as TDF',
        matches: (_, url) => url.pathname === `/api/v1/moments${bastille}` && url.searchParams.get('format') === 'tdf' && !files.has('bastille.json'),
        check: ({ body }, curl) => {
          assert.equal(body.id, bastille);
          assert.match(body.tdf_hash, /^[0-9a-f]{64}$/);
          assert.ok(curl.output, 'kept in a file for the ingest');
          files.set(curl.output, JSON.stringify(body));
        },
      },
      {
        example: 'a moment recorded bare (layer 0)',
        optional: true,
        matches: (curl, url) => url.pathname === '/ingest/tdf' && curl.data?.includes(lifecycle) === true,
        check: ({ body }) => assert.deepEqual(body, { ingested: 1, created: 1, updated: 0, paths: [lifecycle] }),
      },
      {
        example: 'its life watched: 0, 1 pending (the Expander), 1 active (the Judge), 2 (the Renderer)',
        optional: true,
        matches: (_, url) => url.pathname === `/api/v1/moments${lifecycle}`,
        check: async (_reply, curl) => {
          assert.equal(piped, 'layer status');
          const seen = await watch(curl, 'layer status', (printed) => printed === '2 active');
          const order = ['0 active', '1 pending', '1 active', '2 active'];
          // The workers poll every 50 ms here (2 s under npm start), so a state may pass between two reads.
          assert.deepEqual(
            seen,
            order.filter((state) => seen.includes(state)),
            seen.join(' → '),
          );
          assert.equal(seen.at(-1), '2 active', seen.join(' → '));
          const moment = (await h.get(`/api/v1/moments${lifecycle}`)).body;
          // Offline the Expander makes nothing up: layer 1 keeps what the writer wrote (no description), and
          // the description is the Renderer's, from the scene.
          assert.equal(moment.description, 'Sixty cyclists set off on a 2,428 km race around France.', "layer 2's description, the Renderer's");
          assert.match(moment.image_url, /\/api\/v1\/timepoints\/.+\/image$/, "layer 2's image, the Renderer's");
        },
      },
      {
        example: 'a spam proposal for the Judge',
        optional: true,
        matches: (curl, url) => url.pathname === '/ingest/tdf' && curl.data?.includes(spam) === true,
        check: ({ body }) => assert.deepEqual(body.paths, [spam]),
      },
      {
        example: 'the Judge rejects it: archived and private',
        optional: true,
        matches: (_, url) => url.pathname === `/api/v1/moments${spam}`,
        check: async (_reply, curl) => {
          assert.equal(piped, 'status visibility');
          assert.equal((await watch(curl, 'status visibility', (printed) => printed === 'archived private')).at(-1), 'archived private');
          assert.equal((await h.get(`/api/v1/moments${spam}`)).status, 404, 'out of public reads');
        },
      },
      {
        example: 'the export ingested back, with the same tdf_hash',
        matches: (curl, url) => url.pathname === '/ingest/tdf' && curl.data === '@bastille.json',
        check: async ({ body }) => {
          assert.deepEqual(body, { ingested: 1, created: 0, updated: 1, paths: [bastille] });
          const before = JSON.parse(files.get('bastille.json')!).tdf_hash;
          const after = (await h.get(`/api/v1/moments${bastille}?format=tdf`)).body.tdf_hash;
          assert.equal(after, before);
        },
      },
      {
        example: 'the moment exported again, with the tdf_hash it had before the ingest',
        optional: true,
        matches: (_, url) => url.pathname === `/api/v1/moments${bastille}` && url.searchParams.get('format') === 'tdf' && files.has('bastille.json'),
        check: ({ body }) => assert.equal(body.tdf_hash, JSON.parse(files.get('bastille.json')!).tdf_hash),
      },
      {
        example: 'a new moment to render',
        matches: (_, url) => url.pathname === '/generate',
        check: ({ status, body }) => {
          assert.equal(status, 202);
          assert.match(body.job.id, /^[0-9a-f-]{36}$/);
          assert.equal(body.moment.path, '/1903/july/1/1516/france/ile-de-france/montgeron/first-tour-de-france');
          lastJob = body.job.id;
        },
      },
      {
        example: 'its render job, queued to succeeded',
        matches: (_, url) => url.pathname.startsWith('/api/v1/graph/jobs/'),
        check: async (reply, curl) => {
          assert.equal(reply.status, 200, JSON.stringify(reply.body));
          assert.equal(reply.body.id, lastJob);
          assert.ok(['queued', 'running', 'succeeded'].includes(reply.body.status), reply.body.status);
          // Asked again, as the README's arrow says, the job reaches succeeded and the moment layer 2.
          const job = await waitFor(
            'the render job to succeed',
            async () => {
              const asked = (await run(curl)).body;
              return asked.status === 'succeeded' && asked;
            },
            { timeoutMs: 20_000 },
          );
          assert.equal((await h.get(`/api/v1/moments${job.path}`)).body.layer, 2);
        },
      },
    ];

    const used = new Set<string>();
    for (const line of tourLines(readFileSync(README, 'utf8'))) {
      // NAME=value, NAME=$(curl … | field F) (the answer's field F), or curl … [| field F].
      const assignment = /^([A-Z]+)=(.*)$/.exec(line);
      const substitution = assignment && /^\$\((curl .*)\)$/.exec(assignment[2]!);
      if (assignment && !substitution) {
        variables[assignment[1]!] = local[assignment[1]!] ?? words(assignment[2]!, variables)[0] ?? '';
        continue;
      }
      const [command, names] = commandOf(substitution ? substitution[1]! : line).split(/\s*\|\s*field\s+/) as [string, string | undefined];
      piped = names?.trim();
      const curl = parseCurl(command, variables);
      const url = new URL(curl.url);
      const found = checks.filter((candidate) => candidate.matches(curl, url));
      assert.equal(found.length, 1, `README example ${line} has ${found.length} checks`);
      const reply = await run(curl);
      assert.ok(reply.status < 300, `${line}: ${reply.status} ${JSON.stringify(reply.body)}`);
      await found[0]!.check(reply, curl);
      used.add(found[0]!.example);
      const printed = piped ? field(reply.body, piped) : JSON.stringify(reply.body);
      if (substitution) variables[assignment![1]!] = printed;
    }
    assert.deepEqual(
      checks.filter((check) => !check.optional && !used.has(check.example)).map((check) => check.example),
      [],
      'every check has its README example',
    );
  });
});
