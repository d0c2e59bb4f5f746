// What a node run changes on the host, recorded before it starts so that it can be put back when it stops
// (test/k8s/README.md, "Leaving the host as it was"): sysctls, iptables and nftables
// rules, mounts, network links, cgroups, and the host paths the kubelet, containerd and the CNI plugins
// write outside the run's own folder. Everything here is synchronous so that it also runs from a
// process 'exit' handler, after a failed test or an interrupt.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface HostSnapshot {
  /** Values by path under /proc/sys (net/ipv4/ip_forward). */
  sysctls: Record<string, string>;
  /** Normalised `*-save` output per backend and table, without counters; tables with nothing in them left out. */
  iptables: Record<string, Record<string, string>>;
  nftTables: string[];
  mounts: string[];
  links: string[];
  /** Top-level cgroups of every hierarchy, as `hierarchy/name`. */
  cgroups: string[];
  /** Each watched host path: null when absent, else its entries. */
  paths: Record<string, string[] | null>;
}

/** Where the kubelet, containerd, runc and the CNI plugins write outside the folders they are given. */
const WATCHED_PATHS = [
  '/var/lib/cni',
  '/run/netns',
  '/run/containerd',
  '/run/runc',
  '/var/log/pods',
  '/var/log/containers',
  '/var/lib/kubelet',
  '/var/lib/containerd',
  '/var/lib/buildkit',
  '/run/buildkit',
  '/etc/cni',
  '/etc/kubernetes',
];
const SYSCTL_TREES = ['kernel', 'vm', 'net'];
// Counters and one-shot switches, which change on their own or must not be written back.
const VOLATILE_SYSCTLS = /^(kernel\/(ns_last_pid|random\/.*|tainted)|vm\/(drop_caches|compact_memory|stat_refresh))$/;
const IPTABLES_BACKENDS = ['iptables', 'ip6tables', 'iptables-legacy', 'ip6tables-legacy'];
const BUILTIN_CHAINS: Record<string, string[]> = {
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  raw: ['PREROUTING', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};

function run(command: string, args: string[], input?: string): { ok: boolean; out: string; err: string } {
  const r = spawnSync(command, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
  return { ok: r.status === 0, out: r.stdout ?? '', err: (r.stderr ?? '') + (r.error ? String(r.error) : '') };
}

function readSysctls(): Record<string, string> {
  const values: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else {
        // Keyed by path under /proc/sys: interface names may contain dots.
        const key = path.slice('/proc/sys/'.length);
        // Readable and writable by root; the rest cannot be changed, or not read back.
        if ((lstatSync(path).mode & 0o600) !== 0o600 || VOLATILE_SYSCTLS.test(key)) continue;
        try {
          values[key] = readFileSync(path, 'utf8');
        } catch {
          // Some entries refuse reads in this namespace.
        }
      }
    }
  };
  for (const tree of SYSCTL_TREES) walk(join('/proc/sys', tree));
  return values;
}

function parseIptables(save: string): Record<string, string> {
  const tables: Record<string, string> = {};
  let table = '';
  let lines: string[] = [];
  for (const raw of save.split('\n')) {
    const line = raw.replace(/ \[\d+:\d+\]$/, '');
    if (line.startsWith('#') || line === '') continue;
    if (line.startsWith('*')) {
      table = line.slice(1);
      lines = [];
    } else if (line === 'COMMIT') {
      const builtinsOnly = lines.every((l) => BUILTIN_CHAINS[table]?.some((c) => l === `:${c} ACCEPT`));
      if (!builtinsOnly) tables[table] = lines.join('\n');
    } else lines.push(line);
  }
  return tables;
}

function readIptables(): Record<string, Record<string, string>> {
  const all: Record<string, Record<string, string>> = {};
  for (const backend of IPTABLES_BACKENDS) {
    const r = run(`${backend}-save`, []);
    all[backend] = r.ok ? parseIptables(r.out) : {};
  }
  return all;
}

function readNftTables(): string[] {
  const r = run('nft', ['list', 'tables']);
  return r.ok
    ? r.out
        .split('\n')
        .filter((l) => l.startsWith('table '))
        .sort()
    : [];
}

function unescapeMount(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

function readMounts(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => unescapeMount(l.split(' ')[4]!));
}

function readLinks(): string[] {
  return readdirSync('/sys/class/net').sort();
}

function cgroupHierarchies(): string[] {
  if (!existsSync('/sys/fs/cgroup')) return [];
  // cgroup v1 mounts each hierarchy under /sys/fs/cgroup (v2 "unified" among them); pure v2 is one tree.
  const entries = readdirSync('/sys/fs/cgroup', { withFileTypes: true }).filter((e) => e.isDirectory() && !e.isSymbolicLink());
  if (existsSync('/sys/fs/cgroup/cgroup.controllers')) return ['.'];
  return entries.map((e) => e.name).filter((n) => existsSync(join('/sys/fs/cgroup', n, 'cgroup.procs')));
}

function readCgroups(): string[] {
  const all: string[] = [];
  for (const h of cgroupHierarchies()) {
    for (const e of readdirSync(join('/sys/fs/cgroup', h), { withFileTypes: true })) if (e.isDirectory()) all.push(`${h}/${e.name}`);
  }
  return all.sort();
}

function readPaths(): Record<string, string[] | null> {
  const paths: Record<string, string[] | null> = {};
  for (const p of WATCHED_PATHS) {
    try {
      paths[p] = lstatSync(p).isDirectory() ? readdirSync(p).sort() : [];
    } catch {
      paths[p] = null;
    }
  }
  return paths;
}

export function snapshotHost(): HostSnapshot {
  return {
    sysctls: readSysctls(),
    iptables: readIptables(),
    nftTables: readNftTables(),
    mounts: readMounts(),
    links: readLinks(),
    cgroups: readCgroups(),
    paths: readPaths(),
  };
}

/** Human-readable differences between two snapshots; empty when the host is as it was. */
export function diffHost(before: HostSnapshot, after: HostSnapshot): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(before.sysctls)) {
    const now = after.sysctls[k];
    if (now !== undefined && now !== v) out.push(`sysctl ${k}: ${v.trim()} -> ${now.trim()}`);
  }
  for (const backend of IPTABLES_BACKENDS) {
    const b = before.iptables[backend] ?? {};
    const a = after.iptables[backend] ?? {};
    for (const t of new Set([...Object.keys(b), ...Object.keys(a)])) if (b[t] !== a[t]) out.push(`${backend} table ${t} differs`);
  }
  const added = (name: string, b: string[], a: string[]) => {
    const set = new Set(b);
    for (const x of a) if (!set.has(x)) out.push(`${name} added: ${x}`);
  };
  added('nft', before.nftTables, after.nftTables);
  added('mount', before.mounts, after.mounts);
  added('link', before.links, after.links);
  added('cgroup', before.cgroups, after.cgroups);
  for (const [p, entries] of Object.entries(before.paths)) {
    const now = after.paths[p];
    if (entries === null && now !== null && now !== undefined) out.push(`path created: ${p}`);
    else if (entries && now) added(`entry in ${p}`, entries, now);
  }
  return out;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** True while the process exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Sends `signal`, waits up to `graceMs` for the processes to end, then SIGKILLs the rest. */
export function killAndWait(pids: number[], signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): void {
  const living = () => pids.filter(alive);
  for (const pid of living()) {
    try {
      process.kill(pid, signal);
    } catch {
      // Gone already.
    }
  }
  const deadline = Date.now() + graceMs;
  while (living().length > 0 && Date.now() < deadline) sleepSync(50);
  for (const pid of living()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  const hardDeadline = Date.now() + 5_000;
  while (living().length > 0 && Date.now() < hardDeadline) sleepSync(50);
}

/** Processes whose command line mentions `marker` (a run's folder): the containerd shims, and stragglers. */
export function processesMentioning(marker: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) pids.push(Number(name));
    } catch {
      // Ended meanwhile.
    }
  }
  return pids;
}

function cgroupPids(dir: string): number[] {
  const pids: number[] = [];
  const walk = (d: string) => {
    try {
      for (const p of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (p) pids.push(Number(p));
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    } catch {
      // Removed meanwhile.
    }
  };
  walk(dir);
  return pids;
}

function removeCgroup(dir: string): void {
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroup(join(dir, e.name));
    rmdirSync(dir);
  } catch {
    // Reported by the check that follows.
  }
}

export interface RestoreScope {
  /** Mounts and processes under this folder are the run's. */
  runDir: string;
  /** Other paths whose processes are the run's (etcd's data directory, kept on tmpfs apart from the run's folder). */
  processMarkers?: string[];
  /** Links the run may create: its bridge, and the host ends of pods' veth pairs. */
  links: RegExp;
}

/**
 * Puts back what `before` recorded: kills the processes of the run's cgroups and those naming its folder,
 * unmounts its mounts, deletes its links and cgroups, restores changed iptables tables and deletes new
 * nftables tables, writes back changed sysctls and removes what appeared in the watched host paths.
 * Returns the differences that remain (none when the host is as it was).
 */
export function restoreHost(before: HostSnapshot, scope: RestoreScope, log: (m: string) => void = () => {}): string[] {
  // Processes first: nothing may hold mounts, links or cgroups.
  const newCgroups = readCgroups().filter((c) => !before.cgroups.includes(c));
  const strays = [
    ...new Set([
      ...newCgroups.flatMap((c) => cgroupPids(join('/sys/fs/cgroup', c))),
      ...[scope.runDir, ...(scope.processMarkers ?? [])].flatMap(processesMentioning),
    ]),
  ];
  if (strays.length > 0) {
    log(`killing ${strays.length} leftover processes`);
    killAndWait(strays, 'SIGKILL', 0);
  }

  const mounts = readMounts()
    .filter((m) => !before.mounts.includes(m))
    .filter((m) => m.startsWith(scope.runDir) || WATCHED_PATHS.some((p) => m === p || m.startsWith(`${p}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    if (!run('umount', [m]).ok) run('umount', ['-l', m]);
  }

  for (const link of readLinks()) {
    if (!before.links.includes(link) && scope.links.test(link)) run('ip', ['link', 'delete', link]);
  }

  for (const c of newCgroups) removeCgroup(join('/sys/fs/cgroup', c));

  const iptables = readIptables();
  for (const backend of IPTABLES_BACKENDS) {
    for (const [table, now] of Object.entries(iptables[backend] ?? {})) {
      const was = before.iptables[backend]?.[table];
      if (was === now) continue;
      const legacy = backend.endsWith('-legacy');
      if (was === undefined && !legacy) {
        run('nft', ['delete', 'table', backend.startsWith('ip6') ? 'ip6' : 'ip', table]);
        continue;
      }
      const body = was ?? (BUILTIN_CHAINS[table] ?? []).map((c) => `:${c} ACCEPT`).join('\n');
      const r = run(`${backend}-restore`, [], `*${table}\n${body}\nCOMMIT\n`);
      if (!r.ok) log(`${backend}-restore ${table} failed: ${r.err.trim()}`);
    }
  }
  for (const table of readNftTables()) {
    if (!before.nftTables.includes(table)) run('nft', ['delete', ...table.split(' ')]);
  }

  const sysctls = readSysctls();
  for (const [key, value] of Object.entries(before.sysctls)) {
    if (sysctls[key] === undefined || sysctls[key] === value) continue;
    try {
      writeFileSync(join('/proc/sys', key), value);
    } catch (err) {
      log(`sysctl ${key} could not be restored: ${String(err)}`);
    }
  }

  const paths = readPaths();
  for (const [p, entries] of Object.entries(before.paths)) {
    const now = paths[p];
    if (!now) continue;
    if (entries === null) rmSync(p, { recursive: true, force: true });
    else for (const e of now) if (!entries.includes(e)) rmSync(join(p, e), { recursive: true, force: true });
  }

  return diffHost(before, snapshotHost());
}
