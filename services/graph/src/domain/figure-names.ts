import { createHash } from 'node:crypto';
import { FIGURE_ALIASES } from './figure-aliases.ts';

/**
 * How the `entity` filter matches historical figures: the way a person searches. Every figure name (and
 * each of its aliases) is reduced to words: lower case, accents and ligatures folded ("Napoléon" is
 * "napoleon", "Søren" is "soren", "Œ" is "oe"), anything but letters and digits a separator. A query
 * matches a figure when every word of the query is a word of one name of that figure, in any order:
 * "napoleon", "Bonaparte" and "bonaparte napoleon" find Napoleon Bonaparte; "jeanne d’arc" finds Joan of
 * Arc through her alias; "napoleon arc" finds no moment merely because both figures are in it.
 *
 * An apostrophe inside a word is read both ways, so "D'Arcy" is found as "d'arcy", "d arcy" and "darcy".
 *
 * Stored per moment: `entity_keys`, every word of every name (the GIN-indexed column a query's words must
 * all be in), and `entity_names`, each name's words joined by spaces (the per-figure recheck).
 */

const APOSTROPHES = /['’‘ʼʻ`´]/gu;
const HAS_APOSTROPHE = /['’‘ʼʻ`´]/u;
// Letters that do not decompose into a base letter and a mark under NFKD.
const FOLDED: Record<string, string> = { ß: 'ss', æ: 'ae', œ: 'oe', ø: 'o', ł: 'l', đ: 'd', ð: 'd', þ: 'th', ı: 'i', ħ: 'h', ŧ: 't' };
const UNFOLDED = new RegExp(`[${Object.keys(FOLDED).join('')}]`, 'gu');

function fold(text: string): string {
  return text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .replace(UNFOLDED, (letter) => FOLDED[letter]!);
}

const words = (text: string): string[] => text.split(/[^\p{L}\p{N}]+/u).filter(Boolean);

/** The words of a text, an apostrophe separating words. */
const separatedWords = (text: string): string[] => words(fold(text).replace(APOSTROPHES, ' '));

/** The words of a query: an apostrophe separates words, as the stored names allow. */
export function queryWords(text: string): string[] {
  return [...new Set(separatedWords(text))];
}

/** A name's spellings as word lists: apostrophes as separators and, when it has any, dropped. */
function spellings(name: string): string[][] {
  const separated = separatedWords(name);
  if (!HAS_APOSTROPHE.test(name)) return [separated];
  return [separated, words(fold(name).replace(APOSTROPHES, ''))];
}

// By a name's words, so that "Martin Luther King Jr" finds the aliases listed under "Martin Luther King Jr.".
const nameKey = (name: string) => separatedWords(name).join(' ');
const ALIASES = new Map(Object.entries(FIGURE_ALIASES).map(([name, aliases]) => [nameKey(name), aliases]));

/** What a moment's figures are stored as for the `entity` filter. */
export function figureKeys(figures: readonly string[]): { entity_keys: string[]; entity_names: string[] } {
  const names = new Set<string>();
  for (const figure of figures) {
    for (const name of [figure, ...(ALIASES.get(nameKey(figure)) ?? [])]) {
      for (const spelling of spellings(name)) if (spelling.length > 0) names.add(spelling.join(' '));
    }
  }
  const keys = new Set([...names].flatMap((name) => name.split(' ')));
  return { entity_keys: [...keys], entity_names: [...names] };
}

/**
 * Identifies the rules and aliases above: the graph service re-derives every stored moment's keys when
 * the stored keys were made under another version (graph_meta `figure_keys`). Bump the rule number with
 * any change to the functions above; alias changes are picked up by the hash.
 */
export const FIGURE_KEYS_VERSION = `rules-1:${createHash('sha256').update(JSON.stringify(FIGURE_ALIASES)).digest('hex').slice(0, 16)}`;
