// docs/kind.md, the kind quickstart, checked where no kind cluster can run: its blocks are either runnable or
// marked "kind only" (kind's node container, Docker) or "needs internet", and only those that must be; the page, kind-config.yaml and the charts' kind values agree on the cluster's name,
// the image names and the host; and its API commands (sign in, render a scene, open the graph, read the
// metrics) run as written against a fresh `npm start`. quickstart.test.ts runs the cluster half on the
// test node.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { LOCAL_REGISTRY } from '../k8s/node.ts';
import { type Platform, startPlatform } from '../support/platform.ts';
import { BLOCK_INFO, type DocBlock, kindDocBlocks, ROOT, runnable } from './kind-doc.ts';

const blocks = kindDocBlocks();
const kindConfig = parse(readFileSync(join(ROOT, 'kind-config.yaml'), 'utf8')) as { name: string; containerdConfigPatches: string[] };
const kindValues = parse(readFileSync(join(ROOT, 'charts', 'tempora', 'examples', 'kind.yaml'), 'utf8')) as {
  image?: unknown;
  ingress: { host: string; className: string };
};

/** What a kind-only block would run: docker and kind replaced by functions that print their arguments. */
function dryRunKindOnly(block: DocBlock): string[] {
  // docker reads what is piped to it (the registry's hosts.toml), so that the writer gets no SIGPIPE.
  const script = `docker() { cat >/dev/null; echo "docker $*"; }\nkind() { echo "kind $*"; }\nkubectl() { echo "kubectl $*"; }\nhelm() { echo "helm $*"; }\n${block.script}`;
  const r = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

describe('docs/kind.md', function () {
  it('has shell blocks only, each runnable, kind only or needing the internet, and names what the tests cannot run', function () {
    assert.ok(blocks.length >= 10);
    for (const b of blocks) assert.ok((Object.values(BLOCK_INFO) as string[]).includes(b.info), `block under "${b.section}" has info "${b.info}"`);
    // Only what needs kind's node container or Docker: the registry's container and the cluster.
    const kindOnly = blocks.filter((b) => b.kindOnly);
    assert.deepEqual([...new Set(kindOnly.map((b) => b.section))], ['1. A registry and the cluster', '11. Change, roll back, remove']);
    for (const b of kindOnly) assert.match(b.script, /^(kind|docker) /m, `kind-only block under "${b.section}" runs kind or docker`);
    // Only what downloads from the internet: Traefik's and kube-prometheus-stack's charts and images, and the Grafana of the latter.
    const needsInternet = blocks.filter((b) => b.needsInternet);
    assert.deepEqual(
      [...new Set(needsInternet.map((b) => b.section))],
      ['2. An ingress controller', '3. Prometheus and Grafana (optional)', '10. Watch the metrics'],
    );
    for (const b of needsInternet)
      assert.match(b.script, /helm repo add \S+ https:\/\/|monitoring-grafana/, `block under "${b.section}" downloads, or uses what step 3 downloaded`);
    // Runnable blocks never need Docker, kind or the internet; the sign-in goes through the Ingress.
    for (const b of blocks.filter((x) => x.run))
      assert.doesNotMatch(b.script, /\b(docker|kind) |helm repo add|https:\/\/(?!.*localhost)/, `runnable block under "${b.section}"`);
    assert.match(runnable(blocks, ['7.']), /^GW=http:\/\/tempora\.localhost$/m);
  });

  it("runs kind's local registry recipe, and makes and removes the cluster kind-config.yaml names", function () {
    const lines = dryRunKindOnly(blocks.find((b) => b.section.startsWith('1.'))!);
    assert.deepEqual(lines, [
      `docker run -d --restart=always -p 127.0.0.1:${LOCAL_REGISTRY.split(':')[1]}:5000 --network bridge --name kind-registry registry:2`,
      'kind create cluster --config kind-config.yaml',
      `kubectl config use-context kind-${kindConfig.name}`,
      `docker exec ${kindConfig.name}-control-plane mkdir -p /etc/containerd/certs.d/${LOCAL_REGISTRY}`,
      `docker exec -i ${kindConfig.name}-control-plane cp /dev/stdin /etc/containerd/certs.d/${LOCAL_REGISTRY}/hosts.toml`,
      'docker network connect kind kind-registry',
      'kubectl apply -f docs/examples/kind-local-registry.yaml',
    ]);
    // The node's containerd reads the folder the recipe writes the registry's hosts.toml into.
    assert.match(kindConfig.containerdConfigPatches.join('\n'), /config_path = "\/etc\/containerd\/certs\.d"/);
    const hosting = parse(readFileSync(join(ROOT, 'docs', 'examples', 'kind-local-registry.yaml'), 'utf8')) as { data: Record<string, string> };
    assert.equal((parse(hosting.data['localRegistryHosting.v1']!) as { host: string }).host, LOCAL_REGISTRY);
    const remove = dryRunKindOnly(blocks.filter((b) => b.section.startsWith('11.') && b.kindOnly)[0]!);
    assert.deepEqual(remove, [`kind delete cluster --name ${kindConfig.name}`, 'docker rm -f kind-registry']);
  });

  it('publishes to the local registry and installs, upgrades from it the charts it published, at one version', function () {
    const [, registry, version] = /^npm run release -- --registry (\S+) --version (\S+) --plain-http$/m.exec(runnable(blocks, ['4.']))!;
    assert.equal(registry!.split('/')[0], LOCAL_REGISTRY);
    const installs = runnable(blocks, ['5.', '6.', '11.']);
    const charts = [...installs.matchAll(/helm (?:install|upgrade) \S+ (oci:\/\/\S+) --version (\S+) --plain-http/g)].map((m) => [m[1], m[2]]);
    assert.deepEqual(charts, [
      [`oci://${registry}/charts/tempora-operator`, version],
      [`oci://${registry}/charts/tempora`, version],
      [`oci://${registry}/charts/tempora`, version],
    ]);
    // The released chart names the images; the kind values leave them to it.
    assert.equal(kindValues.image, undefined);
  });

  it('signs in at the Ingress host of the kind values, through the class the ingress controller serves', function () {
    const gw = blocks.find((b) => b.section.startsWith('7.') && b.script.startsWith('GW='))!.script.trim();
    assert.equal(gw, `GW=http://${kindValues.ingress.host}`);
    assert.match(kindValues.ingress.host, /\.localhost$/, 'resolves to this machine without /etc/hosts');
    assert.equal(kindValues.ingress.className, 'traefik');
    assert.match(
      blocks.find((b) => b.section.startsWith('2.'))!.script,
      /helm install traefik traefik\/traefik .*--set ports\.web\.hostPort=80 --set ports\.websecure\.hostPort=443/s,
    );
    assert.match(blocks.find((b) => b.section.startsWith('2.'))!.script, /nodeSelector\.ingress-ready=true/);
    // A pinned chart, from an index just fetched.
    assert.match(
      blocks.find((b) => b.section.startsWith('2.'))!.script,
      /helm repo update traefik\nhelm install traefik traefik\/traefik --version \d+\.\d+\.\d+ /,
    );
  });

  it('installs with files that exist', function () {
    for (const path of runnable(blocks, ['5.', '6.', '11.']).matchAll(/\b(charts\/\S+)/g)) assert.ok(existsSync(join(ROOT, path[1]!)), path[1]);
  });

  describe('its API commands, as written, against a fresh npm start', function () {
    this.timeout(600_000);
    let platform: Platform;
    const workDir = mkdtempSync(join(tmpdir(), 'tempora-kind-doc-'));

    before(async function () {
      platform = await startPlatform();
    });

    after(async function () {
      await platform?.stop();
      rmSync(workDir, { recursive: true, force: true });
    });

    it('signs in, renders a scene, opens the graph and reads the metrics', function () {
      // curl fails on an HTTP error instead of printing it, so every command must succeed; the page's
      // http://tempora.localhost is connected to npm start's gateway.
      const gateway = new URL(platform.urls.gateway);
      const connectTo = `--connect-to ${kindValues.ingress.host}:80:${gateway.hostname}:${gateway.port}`;
      // The page reads the gateway's metrics port through the API server's service proxy; here that port is npm start's.
      const kubectl = `kubectl() { [ "$1 $2" = "get --raw" ] && [ "$3" = /api/v1/namespaces/tempora/services/tempora-gateway:metrics/proxy/metrics ] && curl -sS --fail-with-body ${platform.metricsUrls.gateway}/metrics; }`;
      const script = `${kubectl}\n${runnable(blocks, ['7.', '8.', '9.', '10.']).replaceAll(/curl -s /g, `curl -sS --fail-with-body ${connectTo} `)}`;
      const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: workDir, encoding: 'utf8', timeout: 300_000, env: process.env });
      const said = `${run.stdout}\n--- stderr ---\n${run.stderr}`.slice(-6000);
      assert.equal(run.status, 0, `the commands failed:\n${said}`);
      const [user, balance, title, path, moment, ...metrics] = run.stdout.trim().split('\n');
      assert.match(user!, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `the signed-in user's id:\n${said}`);
      assert.match(balance!, /^\d+$/, 'the credit balance');
      assert.ok(title && !title.startsWith('{'), `a scene title: ${title}`);
      assert.equal(path!.split('/').length, 9, `a moment's canonical path: ${path}`);
      assert.equal(moment, 'Storming of the Bastille');
      for (const route of ['route="/api/v1/auth/demo",status="201"', 'route="proxy:generation",status="200"', 'route="proxy:graph",status="200"']) {
        assert.ok(
          metrics.some((l) => l.startsWith('http_server_request_duration_seconds_count{') && l.includes(route)),
          `the metrics count ${route}:\n${said}`,
        );
      }
    });
  });
});
