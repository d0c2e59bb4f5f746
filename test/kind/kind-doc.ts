// docs/kind.md as the tests read it: its shell blocks in order, each with the section it is in and whether it
// is marked "kind only" (needs kind's node container, Docker or the internet, so no test can run it).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const KIND_DOC = join(ROOT, 'docs', 'kind.md');

export interface DocBlock {
  /** The `## ` heading the block is under. */
  section: string;
  /** The fence's info string: `sh`, or `sh kind only`. */
  info: string;
  kindOnly: boolean;
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
      open = { section, info, kindOnly: info === 'sh kind only', script: '' };
    }
  }
  return blocks;
}

/** The runnable blocks of the sections whose heading starts with one of `prefixes` ("5.", "6." ...), joined. */
export function runnable(blocks: DocBlock[], prefixes: string[]): string {
  return blocks
    .filter((b) => !b.kindOnly && prefixes.some((p) => b.section.startsWith(p)))
    .map((b) => b.script)
    .join('\n');
}
