import { z } from 'zod';
import { type ConductorTool, parseWith, schemaOf, ToolFailure } from './tools.ts';

export const PRESETS = ['hyper', 'balanced', 'hd', 'gemini3'] as const;
export const SIMULATION_MODES = ['FORWARD', 'PORTAL', 'BRANCHING', 'CYCLICAL', 'DIRECTORIAL'] as const;
/** The preset and fidelity a call names when the model leaves them out: always sent, so the price and the work agree. */
export const DEFAULT_PRESET = 'balanced';
export const DEFAULT_FIDELITY = 3;

export interface SceneRequest {
  query: string;
  preset: (typeof PRESETS)[number];
  generate_image: boolean;
}

export interface RenderedScene {
  id: string;
  title: string;
  year: number | null;
  path: string | null;
  /** The scene at the gateway (`/api/v1/timepoints/{id}`). */
  url: string;
  image_url: string | null;
  summary: string;
  characters: string[];
  dialog: string[];
  model_provider: string;
}

export interface SceneRenderer {
  render(userId: string, request: SceneRequest, requestId: string, signal: AbortSignal): Promise<RenderedScene>;
}

export interface SimulationRequest {
  prompt?: string | undefined;
  template?: string | undefined;
  mode?: (typeof SIMULATION_MODES)[number] | undefined;
  fidelity: number;
  mechanisms?: string[] | undefined;
}

export interface SimulationRun {
  id: string;
  status: string;
  /** Percent of the run's steps done. */
  progress: number | null;
  mode: string | null;
  fidelity: number | null;
  status_url: string;
}

/** An ended run's result as far as a digest reads it; the rest is the simulation's own, kept there. */
export interface SimulationResult {
  title?: string | null | undefined;
  summary?: string | null | undefined;
  /** The run's confidence, or its confidence by part with the run's. */
  confidence?: number | { run: number } | undefined;
  partial?: unknown;
  [part: string]: unknown;
}

export interface Simulations {
  start(userId: string, request: SimulationRequest, requestId: string, signal: AbortSignal): Promise<SimulationRun>;
  get(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<SimulationRun>;
  result(userId: string, id: string, requestId: string, signal: AbortSignal): Promise<{ run: SimulationRun; result: SimulationResult }>;
}

export interface Balances {
  balance(userId: string, requestId: string): Promise<number>;
}

const RenderArgs = z.object({
  query: z.string().trim().min(3).max(500).meta({ description: 'the moment to render, e.g. "The coronation of Napoleon, Paris, 1804"' }),
  preset: z.enum(PRESETS).default(DEFAULT_PRESET).meta({ description: 'quality and price: hyper (cheapest), balanced (default), hd, gemini3' }),
  generate_image: z
    .boolean()
    .optional()
    .meta({ description: "whether the scene comes with an image (costs the image surcharge); omit to follow the account's default render" }),
});

const SimulationArgs = z
  .object({
    prompt: z
      .string()
      .trim()
      .min(3)
      .max(4000)
      .optional()
      .meta({ description: 'the scenario in words, e.g. "What if the Continental System had failed in 1807?"' }),
    template: z.string().trim().min(1).max(100).optional().meta({ description: "one of the simulation service's templates" }),
    mode: z.enum(SIMULATION_MODES).optional().meta({
      description: 'FORWARD (timeline), PORTAL (backward from an outcome), BRANCHING (what-if), CYCLICAL (feedback loops), DIRECTORIAL (narrative arc)',
    }),
    fidelity: z.number().int().min(1).max(5).default(DEFAULT_FIDELITY).meta({ description: 'detail and price, 1 to 5 (default 3)' }),
    mechanisms: z
      .array(z.string().regex(/^M([1-9]|1[0-9])$/))
      .max(19)
      .optional()
      .meta({ description: 'mechanisms M1 to M19 to switch on' }),
  })
  .refine((args) => args.prompt !== undefined || args.template !== undefined, { message: 'give a prompt or a template', path: ['prompt'] });

const SimulationId = z.object({ simulation_id: z.string().trim().min(1).max(200).meta({ description: 'the id start_simulation returned' }) });

/** A scene rendered by the generation service; priced as the gateway prices the same render through its proxy. */
export function renderTool(renderer: SceneRenderer): ConductorTool<SceneRequest> {
  return {
    name: 'render_scene',
    description: 'Render a historical moment as a full scene (characters, dialog, atmosphere, optionally an image) through the generation service. Paid.',
    parameters: schemaOf(RenderArgs),
    readOnly: false,
    parse: (args, settings) => {
      const parsed = parseWith(
        RenderArgs,
        args,
        'Pass `query` (3 to 500 characters describing the moment), optionally `preset` (hyper, balanced, hd, gemini3) and `generate_image`.',
      );
      if (!parsed.ok) return parsed;
      return { ok: true, value: { ...parsed.value, generate_image: parsed.value.generate_image ?? settings.default_render === 'rich' } };
    },
    price: (value, prices) => prices.scene(value.preset, value.generate_image),
    describe: (value) => `render the scene "${value.query}" (${value.preset}${value.generate_image ? ', with an image' : ', text only'})`,
    run: async (value, context) => {
      const scene = await renderer.render(context.userId, value, context.requestId, context.signal);
      const output = {
        scene_id: scene.id,
        title: scene.title,
        year: scene.year,
        url: scene.url,
        image_url: scene.image_url,
        model_provider: scene.model_provider,
      };
      return {
        result: { ...output, summary: scene.summary, characters: scene.characters, dialog: scene.dialog },
        note: `rendered "${scene.title}"${scene.image_url ? ' with an image' : ''} (scene ${scene.id})`,
        output: { ...output, summary: scene.summary },
      };
    },
  };
}

export function startSimulationTool(simulations: Simulations): ConductorTool<SimulationRequest> {
  return {
    name: 'start_simulation',
    description:
      'Start a multi-entity simulation in the simulation service (from a free-form prompt or a template) in one of five modes. It runs in the background; follow_simulation reports its progress. Paid, by fidelity.',
    parameters: schemaOf(SimulationArgs),
    readOnly: false,
    parse: (args) =>
      parseWith(
        SimulationArgs,
        args,
        'Pass a `prompt` (or a `template`), optionally `mode` (FORWARD, PORTAL, BRANCHING, CYCLICAL, DIRECTORIAL) and `fidelity` 1 to 5.',
      ),
    price: (value, prices) => prices.simulation(value.fidelity),
    describe: (value) =>
      `start a ${value.mode ?? 'FORWARD'} simulation at fidelity ${value.fidelity}${value.prompt ? `: "${value.prompt.slice(0, 120)}"` : ` from template ${value.template}`}`,
    run: async (value, context) => {
      const run = await simulations.start(context.userId, value, context.requestId, context.signal);
      return {
        result: { ...run },
        note: `started simulation ${run.id} (${run.mode ?? value.mode ?? 'FORWARD'}, fidelity ${value.fidelity}): ${run.status}`,
        output: { ...run },
        // The run, not its start, is what was paid for: it is refunded if it fails or is cancelled before a step.
        job: { upstream: 'simulation', location: `/api/v1/simulations/${encodeURIComponent(run.id)}` },
      };
    },
  };
}

export function followSimulationTool(simulations: Simulations): ConductorTool<{ simulation_id: string }> {
  return {
    name: 'follow_simulation',
    description: "A simulation's status and progress. Free.",
    parameters: schemaOf(SimulationId),
    readOnly: true,
    parse: (args) => parseWith(SimulationId, args, 'Pass the `simulation_id` that start_simulation returned.'),
    describe: (value) => `follow simulation ${value.simulation_id}`,
    run: async (value, context) => {
      const run = await simulations.get(context.userId, value.simulation_id, context.requestId, context.signal);
      return {
        result: { ...run },
        note: `simulation ${run.id}: ${run.status}${run.progress === null ? '' : `, ${run.progress}% of its steps done`}`,
        output: { ...run },
      };
    },
  };
}

/** The parts of an ended run a reader starts with; the whole result stays at the simulation service. */
function digest(run: SimulationRun, result: SimulationResult): Record<string, unknown> {
  const confidence = typeof result.confidence === 'number' ? result.confidence : result.confidence?.run;
  const counted = Object.fromEntries(
    ['entities', 'timepoints', 'dialog', 'relationships'].flatMap((key) => {
      const part = result[key];
      return Array.isArray(part) ? [[`${key}_count`, part.length]] : [];
    }),
  );
  const sections = ['timeline', 'portal', 'branching', 'cycles', 'acts'].filter((key) => result[key] !== undefined);
  return {
    id: run.id,
    status: run.status,
    mode: run.mode,
    ...(typeof result.title === 'string' ? { title: result.title } : {}),
    ...(typeof result.summary === 'string' ? { summary: result.summary } : {}),
    ...(typeof confidence === 'number' ? { confidence } : {}),
    ...(result.partial !== undefined ? { partial: result.partial } : {}),
    ...counted,
    ...(sections.length ? { sections } : {}),
  };
}

export function summarizeSimulationTool(simulations: Simulations): ConductorTool<{ simulation_id: string }> {
  return {
    name: 'summarize_simulation',
    description: "A finished simulation's result in brief (summary, outcome, confidence, counts). Free.",
    parameters: schemaOf(SimulationId),
    readOnly: true,
    parse: (args) => parseWith(SimulationId, args, 'Pass the `simulation_id` of a finished simulation.'),
    describe: (value) => `summarize simulation ${value.simulation_id}`,
    run: async (value, context) => {
      const ended = await simulations.result(context.userId, value.simulation_id, context.requestId, context.signal);
      const result = digest(ended.run, ended.result);
      const counts = ['entities', 'timepoints'].filter((key) => result[`${key}_count`] !== undefined).map((key) => `${String(result[`${key}_count`])} ${key}`);
      const note = `simulation ${ended.run.id} ${ended.run.status}${result.title ? ` ("${String(result.title)}")` : ''}${counts.length ? `: ${counts.join(', ')}` : ''}${typeof result.confidence === 'number' ? `, confidence ${result.confidence}` : ''}`;
      return { result, note, output: result };
    },
  };
}

export function balanceTool(balances: Balances): ConductorTool<Record<string, never>> {
  return {
    name: 'get_balance',
    description: "The user's credit balance. Free.",
    parameters: { type: 'object', properties: {} },
    readOnly: true,
    parse: () => ({ ok: true, value: {} }),
    describe: () => 'read your balance',
    run: async (_value, context) => {
      const balance = await balances.balance(context.userId, context.requestId).catch((error: Error) => {
        throw new ToolFailure(`the balance could not be read: ${error.message}`);
      });
      return { result: { balance, currency: 'credits' }, note: `balance ${balance} credits`, output: { balance } };
    },
  };
}
