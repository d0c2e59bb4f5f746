// NetworkPolicies enforced on the test node: kube-router's network policy controller alone (no routing, no
// service proxy, no CNI of its own: the node keeps its bridge and kube-proxy), as k3s runs it beside
// flannel. It programs iptables and ipsets from the API's NetworkPolicies and pods; bridged pod traffic
// passes iptables because the node sets net.bridge.bridge-nf-call-iptables. Built from the Go module
// proxy like the node's other tools.
//
// kube-router v2.1.0 is the newest version the module proxy serves under /v2, and security flaws are
// reported against it: it runs here only, as a test's enforcer on a loopback-only node, never shipped.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { buildGoTool, type GoTool, goToolPath } from './go-tool.ts';
import type { KubeNode } from './node.ts';
import { NODE_NAME } from './node.ts';

export const KUBE_ROUTER_VERSION = 'v2.1.0';
const MODULE = 'github.com/cloudnativelabs/kube-router/v2';
const KUBE_ROUTER: GoTool = {
  name: 'kube-router',
  version: KUBE_ROUTER_VERSION,
  module: MODULE,
  packages: [`${MODULE}/cmd/kube-router`],
  buildHint: 'about 8 min',
};

export interface PolicyEnforcer {
  stop(): Promise<void>;
}

/** The ipsets kube-router made: iptables is restored by the node, the sets are not. */
function destroyIpsets(): void {
  const sets = spawnSync('ipset', ['list', '-n'], { encoding: 'utf8' }).stdout ?? '';
  for (const set of sets.split('\n').filter((s) => /^(inet6:)?KUBE-/.test(s))) spawnSync('ipset', ['destroy', set]);
}

/** Starts enforcing; resolves once kube-router's filter chains exist. */
export async function startPolicyEnforcer(node: KubeNode): Promise<PolicyEnforcer> {
  buildGoTool(KUBE_ROUTER);
  const kubeRouter = goToolPath(KUBE_ROUTER, 'kube-router');
  const args = [
    '--run-firewall=true',
    '--run-router=false',
    '--run-service-proxy=false',
    '--enable-cni=false',
    '--enable-pod-egress=false',
    '--health-port=0',
    '--metrics-port=0',
    `--kubeconfig=${node.kubeconfigPath}`,
    `--hostname-override=${NODE_NAME}`,
    // A policy change reaches iptables within a sync; the default five minutes is a cluster's, not a test's.
    '--iptables-sync-period=5s',
  ];
  // A file, not a pipe: the tests block their event loop in spawnSync for minutes, and an undrained pipe
  // would stop kube-router at its next log line.
  const log = openSync(join(node.runDir, 'kube-router.log'), 'a');
  const child: ChildProcess = spawn(kubeRouter, args, { stdio: ['ignore', log, log] });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const cleanUp = () => {
    spawnSync(kubeRouter, ['--cleanup-config'], { stdio: 'ignore' });
    destroyIpsets();
  };
  // Also when the tests end without stopping it (a failed hook, Ctrl-C): its rules and sets go with it.
  const onExit = () => {
    child.kill('SIGKILL');
    cleanUp();
  };
  process.once('exit', onExit);
  const stop = async () => {
    process.off('exit', onExit);
    child.kill('SIGTERM');
    await exited;
    cleanUp();
  };
  const deadline = Date.now() + 60_000;
  while (spawnSync('iptables', ['-S', 'KUBE-ROUTER-FORWARD'], { stdio: 'ignore' }).status !== 0) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`kube-router did not program iptables; ${join(node.runDir, 'kube-router.log')}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return { stop };
}
