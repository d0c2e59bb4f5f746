import { gatewayCallerConfigFields } from '@tempora/kit/http';
import { providerConfigFields } from '@tempora/kit/providers';
import { baseConfigSchema, csv, optionalString } from '@tempora/kit/runtime';
import { z } from 'zod';

const ms = (fallback: number, min = 1) => z.coerce.number().int().min(min).default(fallback);
const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);

export interface NamedKey {
  name: string;
  key: string;
}

/** SIMULATION_API_KEYS: `name:key` entries (the name owns the runs and appears in logs; the key never does). */
export function parseApiKeys(entries: readonly string[]): NamedKey[] {
  return entries.map((entry) => {
    const separator = entry.indexOf(':');
    const name = entry.slice(0, separator).trim();
    const key = entry.slice(separator + 1).trim();
    if (separator <= 0 || !/^[A-Za-z0-9._-]{1,64}$/.test(name) || key.length < 16) {
      throw new Error(
        `SIMULATION_API_KEYS entry "${name || entry.slice(0, 6)}…" must be name:key with a name of letters, digits and ._- and a key of at least 16 characters`,
      );
    }
    return { name, key };
  });
}

export const SimulationConfigSchema = baseConfigSchema('simulation').extend({
  ...providerConfigFields,
  SIMULATION_API_KEYS: csv.transform((entries, ctx) => {
    try {
      return parseApiKeys(entries);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  }),
  /**
   * Where the SimulationBudget limits are read: a directory of `<budget>.json` files (the operator's
   * ConfigMap mounted as a volume) or one JSON file `{ "<budget>": {...} }`. Unset:
   * TEMPORA_DATA_DIR/simulation-budgets.json, read when it exists (npm start's local file).
   */
  SIMULATION_BUDGETS_PATH: optionalString,
  /** How often the budgets path is re-read; a change takes effect within this without a restart. */
  BUDGETS_RELOAD_MS: ms(2_000, 50),
  /** The gateway's access tokens and their introspection: the kit's settings. */
  ...gatewayCallerConfigFields,
  /** Runs executing at once in this process; more wait queued (durably) for a free slot. */
  RUN_CONCURRENCY: count(16, 1000),
  /** A run's lease: renewed every third of it by the process running it; a run whose lease lapsed is resumed by any replica. */
  RUN_LEASE_MS: ms(15_000, 300),
  /** How often a replica looks for queued runs and runs whose lease lapsed. */
  RUN_CLAIM_INTERVAL_MS: ms(2_000, 20),
  /** Longest a POST /api/v1/simulate may wait for its run (`wait` seconds). */
  MAX_WAIT_SECONDS: count(60, 600),
  STREAM_HEARTBEAT_MS: ms(15_000),
  /** How often an event stream looks for steps made by another replica. */
  STREAM_POLL_MS: ms(1_000),
  /** Model answers refused by the exposure validator are asked again this many times before the run fails. */
  EXPOSURE_RETRIES: z.coerce.number().int().min(0).max(5).default(2),
  /** Text model replacing the fidelity table's defaults (must be in the price table). */
  SIMULATION_TEXT_MODEL: optionalString,
  RATE_LIMIT_READ_PER_MINUTE: z.coerce.number().int().min(1).default(300),
  RATE_LIMIT_WRITE_PER_MINUTE: z.coerce.number().int().min(1).default(60),
});
export type SimulationConfig = z.output<typeof SimulationConfigSchema>;
