import { type ExecFileSyncOptions, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheRoot } from './cache.ts';

export interface PythonTool {
  /** The venv's directory. */
  dir: string;
  /** The path of one of the venv's executables (`st`, `python`, …). */
  bin(name: string): string;
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * A venv of pinned PyPI packages under `${TEMPORA_CACHE_DIR ?? ~/.cache/tempora}/python/<name>`, created
 * and filled with `pip` the first time (a fresh machine has python3 and nothing pip-installed). Kept
 * while its `requirements.txt` lists the same pins; a change of pins rebuilds it. A lock directory
 * keeps two suites from building the same venv at once. PYTHON names the interpreter (default python3).
 */
export function pythonTool(name: string, pins: string[]): PythonTool {
  const root = join(cacheRoot(), 'python');
  const dir = join(root, name);
  const tool = { dir, bin: (executable: string) => join(dir, 'bin', executable) };
  const requirements = `${pins.join('\n')}\n`;
  const ready = () => existsSync(join(dir, 'requirements.txt')) && readFileSync(join(dir, 'requirements.txt'), 'utf8') === requirements;
  if (ready()) return tool;

  mkdirSync(root, { recursive: true });
  const lock = `${dir}.lock`;
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // A lock left by a run that died while installing (older than the longest install) is taken over.
      if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 15 * 60_000) rmdirSync(lock);
      if (Date.now() > deadline) throw new Error(`${lock} is held by another installation for 15 minutes`);
      sleep(1_000);
    }
  }
  try {
    if (ready()) return tool;
    const options: ExecFileSyncOptions = { stdio: ['ignore', 'pipe', 'pipe'], timeout: 15 * 60_000 };
    try {
      execFileSync(process.env.PYTHON ?? 'python3', ['-m', 'venv', '--clear', dir], options);
      execFileSync(tool.bin('pip'), ['install', '--disable-pip-version-check', '--no-input', '--quiet', ...pins], options);
    } catch (error) {
      const { stderr, message } = error as { stderr?: Buffer; message: string };
      throw new Error(`installing ${pins.join(' ')} into ${dir} failed: ${stderr?.toString().slice(-2000) || message}`);
    }
    writeFileSync(join(dir, 'requirements.txt'), requirements);
    return tool;
  } finally {
    rmdirSync(lock);
  }
}
