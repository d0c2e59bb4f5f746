import type { ProviderKind } from '@tempora/kit/providers';
import type { AgentOutput } from '../agents/index.ts';
import type { Brief, GraphMoment, TextAgentName } from '../agents/types.ts';
import type { Selection } from '../models.ts';
import type { GenerateRequest } from '../schemas.ts';
import { JudgeRejected, type OptionalStep, type PipelineRun } from './run.ts';

/** What the agents produced, each typed from its agent's schema (agents/index.ts). */
export interface SceneOutputs {
  judge: AgentOutput<'Judge'>;
  timeline: AgentOutput<'Timeline'>;
  /** null when skipped (model_policy permissive) or failed. */
  grounding: AgentOutput<'Grounding'> | null;
  scene: AgentOutput<'Scene'>;
  characters: AgentOutput<'Characters'>;
  /** One per character, in the same order. */
  bios: Array<AgentOutput<'CharacterBio'>>;
  graph: AgentOutput<'Graph'>;
  moment: AgentOutput<'Moment'>;
  camera: AgentOutput<'Camera'>;
  /** The final draft (the rewrite when Critique sent it back and the rewrite succeeded). */
  dialog: AgentOutput<'Dialog'>;
  /** null when Critique failed; `revised` when Dialog was rewritten. */
  critique: (AgentOutput<'Critique'> & { revised: boolean }) | null;
  image_prompt: AgentOutput<'ImagePrompt'> | null;
  /** null when it failed or generate_image is false. */
  optimizer: AgentOutput<'Optimizer'> | null;
}

/** The image ImageGen rendered: base64 bytes or a remote URL. */
export interface RenderedImage {
  data?: string;
  url?: string;
  mime_type: string;
  provider: ProviderKind;
  model: string;
}

/**
 * The 14 agents as a dependency graph: each agent starts as soon as the outputs it reads exist (Grounding
 * beside Scene, Moment beside Camera, one CharacterBio per character in parallel, the image branch beside
 * the bios/graph/dialog branch); the run reports them in the spec's order whatever finishes first.
 *
 * A new agent: its module in agents/ (prompt, schema, offline output), its entry in agents/index.ts, its
 * node in startBranches (the outputs it reads, required or optional, reported or not), and its place in
 * EVENT_ORDER when the stream reports it.
 */
export async function runAgents(
  run: PipelineRun,
  request: GenerateRequest,
  selection: Selection,
  graphMoment: GraphMoment | null,
): Promise<{ outputs: SceneOutputs; image: RenderedImage | null }> {
  const base: Brief = { query: request.query, graph_moment: graphMoment };
  const judge = await run.required('Judge', base);
  if (!judge.output.valid) run.fail(new JudgeRejected(judge.output.reason || 'the query is not a renderable historical moment'));
  run.report('Judge', judge);

  const timeline = await reported(run, 'Timeline', { ...base, judge: judge.output });
  const [grounding, scene, characters, bios, graph, moment, camera, reviewed, imagePrompt, imaged] = await run.settle(
    startBranches(run, request, selection, base, { ...base, timeline }),
  );
  return {
    outputs: {
      judge: judge.output,
      timeline,
      grounding,
      scene,
      characters,
      bios,
      graph,
      moment,
      camera,
      dialog: reviewed.dialog,
      critique: reviewed.critique,
      image_prompt: imagePrompt.output,
      optimizer: imaged.optimizer,
    },
    image: imaged.image,
  };
}

/** A required agent the stream reports as soon as it is done. */
async function reported<N extends TextAgentName>(run: PipelineRun, agent: N, brief: Brief) {
  const step = await run.required(agent, brief);
  run.report(agent, step);
  return step.output;
}

/** Every agent after the Timeline, each branch started at once and each agent awaiting the outputs it reads. */
function startBranches(run: PipelineRun, request: GenerateRequest, selection: Selection, base: Brief, anchored: Brief) {
  const groundingP = ground(run, selection, anchored);
  const sceneP = reported(run, 'Scene', anchored);
  const charactersP = sceneP.then((scene) => reported(run, 'Characters', { ...anchored, scene }));

  const biosP = Promise.all([sceneP, charactersP]).then(([scene, characters]) =>
    Promise.all(
      characters.characters.map((character, index) =>
        run.required('CharacterBio', { ...anchored, scene, character }, {}, index).then((result) => result.output),
      ),
    ),
  );

  const graphP = Promise.all([charactersP, biosP]).then(async ([characters, bios]) => (await run.required('Graph', { ...anchored, characters, bios })).output);

  const momentP = Promise.all([sceneP, charactersP]).then(([scene, characters]) => reported(run, 'Moment', { ...anchored, scene, characters }));
  const cameraP = Promise.all([sceneP, charactersP]).then(([scene, characters]) => reported(run, 'Camera', { ...anchored, scene, characters }));

  const dialogP = Promise.all([sceneP, charactersP, biosP, graphP, momentP, groundingP]).then(([scene, characters, bios, graph, moment, grounding]) =>
    reviewedDialog(run, { ...anchored, grounding, scene, characters, bios, graph, moment }, { ...anchored, grounding, characters }),
  );

  const imagePromptP = Promise.all([sceneP, charactersP, momentP, cameraP]).then(([scene, characters, moment, camera]) =>
    run.optional('ImagePrompt', { ...anchored, scene, characters, moment, camera }),
  );
  const imageP = imagePromptP.then((prompt) => renderImage(run, request, selection, base, prompt));

  return [groundingP, sceneP, charactersP, biosP, graphP, momentP, cameraP, dialogP, imagePromptP, imageP] as const;
}

/** Grounding, skipped under model_policy permissive (no native calls). */
async function ground(run: PipelineRun, selection: Selection, anchored: Brief) {
  if (!selection.grounding) {
    run.skip('Grounding', 'model_policy permissive');
    return null;
  }
  const result = await run.optional('Grounding', anchored);
  run.report('Grounding', result);
  return result.output;
}

/** Dialog and its Critique: `brief` is what Dialog reads, `reviewBrief` what Critique reads beside the dialog. */
async function reviewedDialog(run: PipelineRun, brief: Brief, reviewBrief: Brief) {
  const draft = await run.required('Dialog', brief);
  run.report('Dialog', draft);

  // Critique may send the dialog back once; the rewrite is critiqued again but never sent back twice.
  const first = await run.optional('Critique', { ...reviewBrief, dialog: draft.output });
  let dialog = draft.output;
  let critique = first.output;
  let record = first.record;
  let revised = false;
  if (first.output?.revise) {
    const rewrite = await run.call('Dialog', { ...brief, previous_dialog: draft.output, revision_feedback: first.output.feedback }, {}, 2);
    if (rewrite.outcome.ok) {
      revised = true;
      dialog = run.outputOf('Dialog', rewrite.outcome);
      const second = await run.optional('Critique', { ...reviewBrief, dialog }, {}, 2);
      if (second.output) critique = { ...second.output, revise: false };
      record = {
        ...second.record,
        duration_ms: second.record.started_ms + second.record.duration_ms - first.record.started_ms,
        started_ms: first.record.started_ms,
      };
    } else if (!run.aborted) {
      run.warn(`Dialog rewrite requested by Critique failed; the first draft was kept: ${rewrite.outcome.error.message}`);
    }
  }
  const reviewed = critique ? { ...critique, revised } : null;
  run.report('Critique', { record, output: reviewed, warning: first.warning });
  return { dialog, critique: reviewed };
}

/** The image branch after ImagePrompt: Optimizer, then ImageGen down the selection's image chain. */
async function renderImage(run: PipelineRun, request: GenerateRequest, selection: Selection, base: Brief, prompt: OptionalStep<AgentOutput<'ImagePrompt'>>) {
  // The run holds these events until Critique has been reported; the branch itself does not wait.
  run.report('ImagePrompt', prompt);
  if (!request.generate_image) {
    run.skip('Optimizer', 'generate_image is false');
    run.skip('ImageGen', 'generate_image is false');
    return { optimizer: null, image: null };
  }
  const source = prompt.output ?? { prompt: `${request.query}, photorealistic historical scene`, negative_prompt: '' };
  const optimised = await run.optional('Optimizer', { ...base, image_prompt: source, image_model: selection.images[0]?.model ?? null });
  run.report('Optimizer', optimised);
  const final = optimised.output ?? { ...source, aspect_ratio: '16:9' };
  const generated = await run.optional('ImageGen', base, {
    images: selection.images,
    image: { prompt: final.prompt, negative_prompt: final.negative_prompt, aspect_ratio: final.aspect_ratio, seed: hashSeed(request.query) },
  });
  const rendered = generated.success?.image;
  const image: RenderedImage | null =
    rendered && generated.success ? { ...rendered, provider: generated.success.provider, model: generated.success.model } : null;
  run.report('ImageGen', generated);
  return { optimizer: optimised.output, image };
}

/** The image seed: the same query renders the same picture where the model honours seeds. */
function hashSeed(text: string): number {
  let hash = 2166136261;
  for (const char of text) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash % 4294967295;
}
