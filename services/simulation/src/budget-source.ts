import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Logger } from '@tempora/kit/observability';
import { BUDGET_NAME, type Budget, BudgetSpecSchema } from './domain/budgets.ts';

export interface BudgetFileError {
  budget: string;
  error: string;
}

/**
 * The SimulationBudgets in force, read from SIMULATION_BUDGETS_PATH: a directory holding one
 * `<name>.json` per budget (the operator's ConfigMap mounted as a volume; the kubelet's `..data` links
 * and other dot-files are skipped) or one JSON file `{ "<name>": {...} }`. It is read again every
 * BUDGETS_RELOAD_MS: polling, because a mounted ConfigMap changes by an atomic swap of a symbolic link
 * that file watchers miss. A budget whose file stops parsing keeps its last good version (dropping it
 * would lift its limit) and is reported in `errors`.
 */
export class BudgetSource {
  private readonly path: string;
  private readonly logger: Logger;
  private budgets = new Map<string, Budget>();
  private lastText = '';
  private timer: NodeJS.Timeout | undefined;
  errors: BudgetFileError[] = [];
  loadedAt: Date | null = null;

  constructor(path: string, logger: Logger) {
    this.path = path;
    this.logger = logger;
  }

  get all(): Budget[] {
    return [...this.budgets.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  get(name: string): Budget | undefined {
    return this.budgets.get(name);
  }

  async start(intervalMs: number): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => void this.reload().catch((error) => this.logger.warn({ err: error }, 'budgets could not be read')), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The raw entries by budget name: a directory's files or a file's keys. */
  private async entries(): Promise<Map<string, string>> {
    const path = this.path;
    const entries = new Map<string, string>();
    const info = await stat(path).catch(() => undefined);
    if (!info) return entries;
    if (info.isDirectory()) {
      for (const name of (await readdir(path)).sort()) {
        if (name.startsWith('.') || !name.endsWith('.json')) continue;
        entries.set(basename(name, '.json'), await readFile(join(path, name), 'utf8'));
      }
      return entries;
    }
    const text = await readFile(path, 'utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new Error(`${path} is not JSON`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${path} must hold an object of budgets by name`);
    for (const [name, value] of Object.entries(parsed)) entries.set(name, JSON.stringify(value));
    return entries;
  }

  async reload(): Promise<void> {
    let entries: Map<string, string>;
    try {
      entries = await this.entries();
    } catch (error) {
      // The whole file is unreadable: every budget keeps its last good version.
      this.errors = [{ budget: '*', error: (error as Error).message }];
      return;
    }
    const text = JSON.stringify([...entries]);
    if (text === this.lastText) return;
    this.lastText = text;
    const next = new Map<string, Budget>();
    const errors: BudgetFileError[] = [];
    for (const [name, raw] of entries) {
      if (!BUDGET_NAME.test(name)) {
        errors.push({ budget: name, error: 'a budget name is a Kubernetes object name (lower-case letters, digits, - and .)' });
        continue;
      }
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        value = undefined;
      }
      const parsed = BudgetSpecSchema.safeParse(value);
      if (parsed.success) next.set(name, { name, ...parsed.data });
      else {
        errors.push({
          budget: name,
          error: value === undefined ? 'not JSON' : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; '),
        });
        const kept = this.budgets.get(name);
        if (kept) next.set(name, kept);
      }
    }
    const before = JSON.stringify(this.all);
    this.budgets = next;
    this.errors = errors;
    this.loadedAt = new Date();
    if (JSON.stringify(this.all) !== before) this.logger.info({ budgets: this.all.map((budget) => budget.name), errors: errors.length }, 'budgets loaded');
    for (const error of errors) this.logger.warn(error, 'budget refused');
  }
}
