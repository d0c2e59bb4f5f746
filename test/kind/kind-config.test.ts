// kind-config.yaml, checked as `kind create cluster --config` would check it (kind cannot run here: it needs
// a container engine). kind-config-check (main.go, validate.go) decodes a file with kind's own public
// v1alpha4 types, strictly, and applies kind's validation rules; these tests feed it the shipped file and
// variants of it that kind refuses.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const HERE = dirname(fileURLToPath(import.meta.url));
const CONFIG = join(HERE, '..', '..', 'kind-config.yaml');

interface PortMapping {
  containerPort: number;
  hostPort: number;
  listenAddress?: string;
  protocol?: string;
}
interface KindNode {
  role: string;
  labels?: Record<string, string>;
  extraPortMappings?: PortMapping[];
  [field: string]: unknown;
}
interface KindCluster {
  kind: string;
  apiVersion: string;
  name?: string;
  nodes: KindNode[];
  networking?: Record<string, unknown>;
}

describe('kind-config.yaml', function () {
  let check = '';
  let dir = '';
  const shipped = parse(readFileSync(CONFIG, 'utf8')) as KindCluster;

  before(function () {
    this.timeout(10 * 60_000); // a clean machine downloads kind's module first
    const built = spawnSync('bash', [join(HERE, 'build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (built.status !== 0) throw new Error(`building kind-config-check failed (exit ${built.status})`);
    check = built.stdout.trim().split('\n').pop()!;
    dir = mkdtempSync(join(tmpdir(), 'tempora-kind-'));
  });

  after(function () {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function run(path: string): { status: number | null; out: string } {
    const r = spawnSync(check, [path], { encoding: 'utf8' });
    return { status: r.status, out: r.stdout + r.stderr };
  }

  /** Writes a variant of the shipped file (as YAML, or raw text) and returns what kind-config-check said. */
  function variant(change: (c: KindCluster) => void): { status: number | null; out: string };
  function variant(text: string): { status: number | null; out: string };
  function variant(change: ((c: KindCluster) => void) | string): { status: number | null; out: string } {
    let text: string;
    if (typeof change === 'string') text = change;
    else {
      const c = structuredClone(shipped);
      change(c);
      text = stringify(c);
    }
    const path = join(dir, `variant-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(path, text);
    return run(path);
  }

  it('is accepted by kind v1alpha4 decoding and validation', function () {
    const r = run(CONFIG);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /^ok /);
  });

  it('makes one node ready for the ingress: labelled ingress-ready, host ports 80 and 443 on loopback only', function () {
    assert.equal(shipped.name, 'tempora');
    assert.equal(shipped.nodes.length, 1);
    const [node] = shipped.nodes;
    assert.equal(node!.role, 'control-plane');
    assert.equal(node!.labels?.['ingress-ready'], 'true');
    assert.deepEqual(
      node!.extraPortMappings!.map((m) => [m.hostPort, m.containerPort, m.listenAddress, m.protocol]),
      [
        [80, 80, '127.0.0.1', 'TCP'],
        [443, 443, '127.0.0.1', 'TCP'],
      ],
    );
  });

  it('refuses a misspelt field, as kind does (strict decoding)', function () {
    const r = variant((c) => {
      c.nodes[0]!.extraPortMapping = c.nodes[0]!.extraPortMappings;
      delete c.nodes[0]!.extraPortMappings;
    });
    assert.equal(r.status, 1);
    assert.match(r.out, /field extraPortMapping not found in type v1alpha4\.Node/);
  });

  it('refuses a field of the wrong type', function () {
    const r = variant((c) => {
      (c.nodes[0]!.extraPortMappings![0] as unknown as Record<string, unknown>).hostPort = 'eighty';
    });
    assert.equal(r.status, 1);
    assert.match(r.out, /unable to decode config/);
  });

  it('refuses a wrong apiVersion and a wrong kind', function () {
    const wrongVersion = variant((c) => (c.apiVersion = 'kind.x-k8s.io/v1alpha3'));
    assert.equal(wrongVersion.status, 1);
    assert.match(wrongVersion.out, /unknown apiVersion: kind\.x-k8s\.io\/v1alpha3/);
    const wrongKind = variant((c) => (c.kind = 'Config'));
    assert.equal(wrongKind.status, 1);
    assert.match(wrongKind.out, /unknown kind Config/);
  });

  it('refuses a port mapping that clashes with another on the same host port', function () {
    // The wildcard address covers 127.0.0.1 too.
    const r = variant((c) => c.nodes[0]!.extraPortMappings!.push({ containerPort: 8080, hostPort: 80, listenAddress: '0.0.0.0', protocol: 'TCP' }));
    assert.equal(r.status, 1);
    assert.match(r.out, /port mapping with same listen address, port and protocol already configured: 0\.0\.0\.0:80\/TCP/);
    // Another protocol on the same port does not clash; a random host port (0) never does.
    const udp = variant((c) =>
      c.nodes[0]!.extraPortMappings!.push(
        { containerPort: 8080, hostPort: 80, listenAddress: '127.0.0.1', protocol: 'UDP' },
        { containerPort: 81, hostPort: 0 },
        { containerPort: 82, hostPort: 0 },
      ),
    );
    assert.equal(udp.status, 0, udp.out);
  });

  it('refuses what kind validates: cluster name, role, ports, subnets, a control plane', function () {
    const cases: [string, (c: KindCluster) => void, RegExp][] = [
      ['an invalid cluster name', (c) => (c.name = 'Tempora_Cluster'), /'Tempora_Cluster' is not a valid cluster name/],
      ['an unknown role', (c) => (c.nodes[0]!.role = 'master'), /"master" is not a valid node role/],
      ['a host port out of range', (c) => (c.nodes[0]!.extraPortMappings![0]!.hostPort = 70000), /invalid hostPort: invalid port number: 70000/],
      ['an unknown protocol', (c) => (c.nodes[0]!.extraPortMappings![0]!.protocol = 'TDP'), /Unknown PortMappingProtocol: "TDP"/],
      ['a listen address that is no address', (c) => (c.nodes[0]!.extraPortMappings![0]!.listenAddress = 'localhost'), /invalid listen address: localhost/],
      ['a pod subnet that is no CIDR', (c) => (c.networking = { podSubnet: '10.244.0.0/33' }), /invalid pod subnet/],
      [
        'an IPv6 service subnet on IPv4',
        (c) => (c.networking = { serviceSubnet: 'fd00:10:96::/112' }),
        /invalid service subnet expected IPv4 CIDR for IPv4 family/,
      ],
      ['an unknown kube-proxy mode', (c) => (c.networking = { kubeProxyMode: 'userspace' }), /invalid kubeProxyMode: userspace/],
      ['workers only', (c) => (c.nodes[0]!.role = 'worker'), /must have at least one control-plane node/],
    ];
    for (const [what, change, message] of cases) {
      const r = variant(change);
      assert.equal(r.status, 1, `${what} should be refused`);
      assert.match(r.out, message, what);
    }
  });

  it('accepts what kind accepts: an unnamed cluster, a worker node, dual-stack subnets', function () {
    const r = variant((c) => {
      delete c.name;
      c.nodes.push({ role: 'worker' });
      c.networking = { ipFamily: 'dual', podSubnet: '10.244.0.0/16,fd00:10:244::/56', serviceSubnet: '10.96.0.0/16,fd00:10:96::/112' };
    });
    assert.equal(r.status, 0, r.out);
    assert.equal(variant('kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n').status, 0);
  });
});
