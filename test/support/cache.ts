import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the tests keep what they build or download between runs (Go tools, Python venvs, images):
 * TEMPORA_CACHE_DIR, else ~/.cache/tempora, the path the shell scripts in test/ use too.
 */
export function cacheRoot(): string {
  return process.env.TEMPORA_CACHE_DIR ?? join(homedir(), '.cache', 'tempora');
}
