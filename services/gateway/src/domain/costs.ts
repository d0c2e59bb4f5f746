import { DEFAULT_GENERATION_PRESET, generationOperation, simulationOperation } from '@tempora/kit/http';

/** Credits each chargeable operation costs. Published at GET /api/v1/credits/costs. */
export const GENERATION_PRESET_COSTS = { hyper: 1, balanced: 2, gemini3: 3, hd: 5 } as const;
export type Preset = keyof typeof GENERATION_PRESET_COSTS;
export const DEFAULT_PRESET: Preset = DEFAULT_GENERATION_PRESET;
/** Added to a generation when `generate_image` is true. */
export const IMAGE_SURCHARGE = 2;
/** A simulation run by fidelity (1 to 5); the spec prices runs from $0.15 to $1.00. */
export const SIMULATION_FIDELITY_COSTS = { 1: 3, 2: 5, 3: 8, 4: 12, 5: 20 } as const;
export const DEFAULT_FIDELITY = 3;

export interface PricedOperation {
  operation: string;
  amount: number;
  /** Its service answers a retry carrying the first call's Idempotency-Key with that call's result: the retry is not charged again. */
  keyed?: boolean;
}

/** A proxied route that costs credits, and how its price is read from the request body. */
interface ChargeableRoute {
  method: string;
  pattern: RegExp;
  price(body: Record<string, unknown>): PricedOperation;
}

const generation = (body: Record<string, unknown>): PricedOperation => {
  const preset = typeof body.preset === 'string' && body.preset in GENERATION_PRESET_COSTS ? (body.preset as Preset) : DEFAULT_PRESET;
  const image = body.generate_image === true;
  return { operation: generationOperation(preset, image), amount: GENERATION_PRESET_COSTS[preset] + (image ? IMAGE_SURCHARGE : 0) };
};

const CHARGEABLE: ChargeableRoute[] = [
  // The asynchronous generation replays a job by its Idempotency-Key; a synchronous one or a stream renders anew.
  { method: 'POST', pattern: /^\/api\/v1\/timepoints\/generate\/?$/, price: (body) => ({ ...generation(body), keyed: true }) },
  { method: 'POST', pattern: /^\/api\/v1\/timepoints\/generate\/(sync|stream|async)\/?$/, price: generation },
  {
    method: 'POST',
    pattern: /^\/api\/v1\/simulate\/?$/,
    price: (body) => {
      const fidelity =
        typeof body.fidelity === 'number' && Number.isInteger(body.fidelity) && body.fidelity >= 1 && body.fidelity <= 5 ? body.fidelity : DEFAULT_FIDELITY;
      return { operation: simulationOperation(fidelity), amount: SIMULATION_FIDELITY_COSTS[fidelity as 1], keyed: true };
    },
  },
];

/** Whether a proxied request is chargeable (its body must then be read to price it). */
export const isChargeable = (method: string, path: string) => CHARGEABLE.some((route) => route.method === method && route.pattern.test(path));

export function priceOf(method: string, path: string, body: unknown): PricedOperation | undefined {
  const route = CHARGEABLE.find((candidate) => candidate.method === method && candidate.pattern.test(path));
  if (!route) return undefined;
  return route.price(body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {});
}

/** The public price list. */
export function costTable(signupCredits: number, demoCredits: number) {
  return {
    currency: 'credits',
    operations: [
      ...Object.entries(GENERATION_PRESET_COSTS).map(([preset, cost]) => ({
        operation: `generation.${preset}`,
        method: 'POST',
        path: '/api/v1/timepoints/generate/{sync|stream}',
        cost,
        description: `one scene with preset ${preset}${preset === DEFAULT_PRESET ? ' (the default)' : ''}`,
      })),
      {
        operation: 'generation.image',
        method: 'POST',
        path: '/api/v1/timepoints/generate/{sync|stream}',
        cost: IMAGE_SURCHARGE,
        description: 'added when generate_image is true',
      },
      ...Object.entries(SIMULATION_FIDELITY_COSTS).map(([fidelity, cost]) => ({
        operation: `simulation.fidelity-${fidelity}`,
        method: 'POST',
        path: '/api/v1/simulate',
        cost,
        description: `one simulation run at fidelity ${fidelity}${Number(fidelity) === DEFAULT_FIDELITY ? ' (the default)' : ''}`,
      })),
    ],
    grants: { signup: signupCredits, demo: demoCredits },
  };
}
