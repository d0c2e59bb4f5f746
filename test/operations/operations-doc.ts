// docs/operations.md as the tests read it: its shell blocks, each with the headings it is under and its
// fence's info string. `sh` blocks are run by a test of this folder; `sh needs pods` needs a cluster
// that runs pods and is run by none.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const OPERATIONS_DOC = join(ROOT, 'docs', 'operations.md');

export interface OperationsBlock {
  /** The `## ` and `### ` headings the block is under, joined by " / ". */
  section: string;
  info: string;
  script: string;
}

export function operationsBlocks(text = readFileSync(OPERATIONS_DOC, 'utf8')): OperationsBlock[] {
  const blocks: OperationsBlock[] = [];
  let [h2, h3] = ['', ''];
  let open: OperationsBlock | undefined;
  for (const line of text.split('\n')) {
    const fence = /^\s*```(.*)$/.exec(line);
    if (open) {
      if (fence) {
        blocks.push(open);
        open = undefined;
      } else open.script += `${line.replace(/^ {3}/, '')}\n`;
    } else if (line.startsWith('## ')) [h2, h3] = [line.slice(3).trim(), ''];
    else if (line.startsWith('### ')) h3 = line.slice(4).trim();
    else if (fence) open = { section: h3 ? `${h2} / ${h3}` : h2, info: fence[1]!.trim(), script: '' };
  }
  return blocks;
}

/** The one `sh` block of the page whose commands include `marker`. */
export function block(marker: string): string {
  const found = operationsBlocks().filter((b) => b.info === 'sh' && b.script.includes(marker));
  assert.equal(found.length, 1, `docs/operations.md has one sh block with ${marker}`);
  return found[0]!.script;
}

/** The variables block at the top of the page (NS, RELEASE). */
export const variables = () => block('RELEASE=');

/** Runs a block with bash -euo pipefail; its output, or a failure naming the block. */
export function runBlock(script: string, options: { cwd: string; env: NodeJS.ProcessEnv }): string {
  const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: options.cwd, env: options.env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, `docs/operations.md block failed (${run.status}):\n${script}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`);
  return run.stdout;
}
