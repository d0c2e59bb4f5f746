// docs/kind.md as the tests read it: its shell blocks in order, each with the section it is in and, when no
// test can run it, why: "kind only" (needs kind's node container or Docker) or "needs internet" (downloads
// from the internet, which the test machines cannot reach).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const KIND_DOC = join(ROOT, 'docs', 'kind.md');

/** The fence info strings of the page: run by the tests, or not and why. */
export const BLOCK_INFO = { run: 'sh', kindOnly: 'sh kind only', needsInternet: 'sh needs internet' } as const;

export interface DocBlock {
  /** The `## ` heading the block is under. */
  section: string;
  /** The fence's info string: one of BLOCK_INFO. */
  info: string;
  /** Needs kind's node container or Docker. */
  kindOnly: boolean;
  /** Downloads from the internet. */
  needsInternet: boolean;
  /** Neither: the tests run it as written. */
  run: boolean;
  script: string;
}

export function kindDocBlocks(text = readFileSync(KIND_DOC, 'utf8')): DocBlock[] {
  const blocks: DocBlock[] = [];
  let section = '';
  let open: DocBlock | undefined;
  for (const line of text.split('\n')) {
    if (open) {
      if (line.startsWith('```')) {
        blocks.push(open);
        open = undefined;
      } else open.script += `${line}\n`;
    } else if (line.startsWith('## ')) section = line.slice(3).trim();
    else if (line.startsWith('```')) {
      const info = line.slice(3).trim();
      const kindOnly = info === BLOCK_INFO.kindOnly;
      const needsInternet = info === BLOCK_INFO.needsInternet;
      open = { section, info, kindOnly, needsInternet, run: !kindOnly && !needsInternet, script: '' };
    }
  }
  return blocks;
}

/** The blocks the tests run, of the sections whose heading starts with one of `prefixes` ("5.", "6." ...), joined. */
export function runnable(blocks: DocBlock[], prefixes: string[]): string {
  return blocks
    .filter((b) => b.run && prefixes.some((p) => b.section.startsWith(p)))
    .map((b) => b.script)
    .join('\n');
}
