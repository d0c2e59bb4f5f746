// The previous release beside the current tree (docs/operations.md, "Upgrades and rollbacks"): which
// commit it is (schema-compat.json), its tree extracted from git history, resolving the current
// installation's third-party packages but its own workspace packages, and the rule a migration added since
// must follow.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from './operations-doc.ts';

/** A migration allowed to narrow the schema, and the release it waited for. */
interface Contract {
  service: string;
  migration: string;
  /** The commit of the release from which no code reads or writes what the migration removes. */
  after: string;
  why: string;
}

interface Releases {
  previous: { commit: string; why: string };
  contract: Contract[];
}

export const RELEASES = JSON.parse(readFileSync(join(ROOT, 'test', 'operations', 'schema-compat.json'), 'utf8')) as Releases;

function git(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Throws, saying how to get it, unless the commit is in this clone's history. */
export function requireCommit(commit: string): void {
  if (git(['cat-file', '-e', `${commit}^{commit}`]).status !== 0)
    throw new Error(
      `commit ${commit} (test/operations/schema-compat.json) is not in this clone: fetch the full history (git fetch --unshallow, or git fetch origin ${commit})`,
    );
}

/** True when `ancestor` is `commit` or comes before it. */
export const isAncestor = (ancestor: string, commit: string) => git(['merge-base', '--is-ancestor', ancestor, commit]).status === 0;

/** A file as it was at `commit`; undefined when it did not exist then. */
export function fileAt(commit: string, path: string): string | undefined {
  const shown = git(['show', `${commit}:${path}`]);
  return shown.status === 0 ? shown.stdout : undefined;
}

/** The names of the migrations a migrations.ts source declares, in order. */
export const migrationNames = (source: string | undefined) => [...(source ?? '').matchAll(/\bname:\s*'([^']+)'/g)].map((match) => match[1]!);

/** The release's tree in a new temporary directory (`git archive`), ready to run; `remove` deletes it. */
export function extractRelease(commit: string): { root: string; remove(): void } {
  requireCommit(commit);
  const root = mkdtempSync(join(tmpdir(), 'tempora-previous-'));
  const tar = join(root, '.release.tar');
  for (const [command, args] of [
    ['git', ['-C', ROOT, 'archive', '--format=tar', `--output=${tar}`, commit]],
    ['tar', ['-xf', tar, '-C', root]],
  ] as const) {
    const run = spawnSync(command, args, { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${run.stderr}`);
  }
  rmSync(tar);
  linkDependencies(root);
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * node_modules for the release's tree without installing: each third-party package is a link to the current
 * installation's, and each workspace package (a link into the repository, `@tempora/kit` → services/kit)
 * a link to the release's own folder, or absent when the release had no such folder.
 */
function linkDependencies(releaseRoot: string): void {
  const link = (from: string, to: string) => {
    for (const name of readdirSync(from)) {
      const current = join(from, name);
      const own = join(to, name);
      const stat = lstatSync(current);
      if (name.startsWith('@') && stat.isDirectory()) {
        mkdirSync(own, { recursive: true });
        link(current, own);
        continue;
      }
      const target = stat.isSymbolicLink() ? resolve(dirname(current), readlinkSync(current)) : current;
      const workspace = relative(ROOT, target);
      if (stat.isSymbolicLink() && !workspace.startsWith('..') && !workspace.startsWith('node_modules')) {
        if (existsSync(join(releaseRoot, workspace))) symlinkSync(join(releaseRoot, workspace), own);
      } else symlinkSync(current, own);
    }
  };
  mkdirSync(join(releaseRoot, 'node_modules'));
  link(join(ROOT, 'node_modules'), join(releaseRoot, 'node_modules'));
}

/**
 * The third-party packages the release's lock file pins at another version than the current one does (or
 * that the current installation lacks): what the release would not run as it was released with.
 */
export function dependencyMismatches(releaseRoot: string): string[] {
  type Lock = { packages: Record<string, { version?: string; link?: boolean }> };
  const lock = (root: string) => (JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as Lock).packages;
  const [previous, current] = [lock(releaseRoot), lock(ROOT)];
  return Object.entries(previous)
    .filter(([path, entry]) => path.startsWith('node_modules/') && !entry.link && current[path]?.version !== entry.version)
    .map(([path, entry]) => `${path.slice('node_modules/'.length)}: ${entry.version} then, ${current[path]?.version ?? 'absent'} now`);
}

/** The source of a migration's `up` without its comments, which may well mention what it avoids. */
const code = (up: string) => up.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');

/** The text of each call to `method(`…`)` in `source`, parentheses balanced. */
function calls(source: string, method: string): string[] {
  const found: string[] = [];
  for (let at = source.indexOf(`${method}(`); at >= 0; at = source.indexOf(`${method}(`, at + 1)) {
    let depth = 0;
    let end = at + method.length;
    do depth += source[end] === '(' ? 1 : source[end] === ')' ? -1 : 0;
    while (depth > 0 && ++end < source.length);
    found.push(source.slice(at, end + 1));
  }
  return found;
}

/**
 * What in a migration's `up` (its source, `migration.up.toString()`) narrows the schema the release before
 * reads and writes: a drop (of anything but a NOT NULL), a rename, a changed type or redefined column, a
 * NOT NULL set on a column with no default set beside it, a NOT NULL column without a default added to an
 * existing table. None for an expansion. Text shows only so much (a constraint its rows do not meet is
 * not seen here): the running half of test/operations/schema-compat.test.ts catches the rest.
 */
export function contractions(up: string): string[] {
  const source = code(up);
  const found: string[] = [];
  for (const match of source.matchAll(/\bdrop\s+(?!not\s+null\b)(?:if\s+exists\s+)?(\w+)/gi)) found.push(`DROP ${match[1]!.toUpperCase()}`);
  for (const match of source.matchAll(/\.(drop[A-Z]\w*)\(/g)) found.push(`knex ${match[1]}()`);
  if (/\brename/i.test(source)) found.push('a rename');
  if (/\balter\s+column\s+"?\w+"?\s+(?:set\s+data\s+)?type\b/i.test(source)) found.push('a changed column type');
  if (/\.alter\(/.test(source)) found.push('a column redefined (knex alter())');
  for (const match of source.matchAll(/\balter\s+column\s+"?(\w+)"?\s+set\s+not\s+null/gi))
    if (!new RegExp(`alter\\s+column\\s+"?${match[1]}"?\\s+set\\s+default`, 'i').test(source)) found.push(`SET NOT NULL on ${match[1]} without a default`);
  for (const match of source.matchAll(/\badd\s+column\s+(?:if\s+not\s+exists\s+)?"?(\w+)"?([^,;`'"]*)/gi))
    if (/\bnot\s+null\b/i.test(match[2]!) && !/\bdefault\b/i.test(match[2]!)) found.push(`NOT NULL column ${match[1]} without a default`);
  for (const call of calls(source, 'alterTable'))
    for (const statement of call.split(/;|\n\s*\n/))
      if (statement.includes('.notNullable()') && !statement.includes('.defaultTo(') && !statement.includes('.alter(')) {
        const column = [...statement.slice(0, statement.indexOf('.notNullable()')).matchAll(/\.\w+\(\s*'(\w+)'/g)].at(-1)?.[1];
        found.push(`NOT NULL column ${column} without a default`);
      }
  return found;
}
