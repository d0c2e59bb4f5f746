import type { Citation, Usage } from '@tempora/kit/providers';
import type { GraphMoment } from '../agents/types.ts';
import type { Selection } from '../models.ts';
import type { GenerateRequest } from '../schemas.ts';
import { type RenderedImage, runAgents, type SceneOutputs } from './dag.ts';
import type { StepRecord } from './events.ts';
import { type PipelineDeps, PipelineRun, type RunOptions } from './run.ts';

export interface PipelineResult {
  outputs: SceneOutputs;
  image: RenderedImage | null;
  steps: StepRecord[];
  warnings: string[];
  citations: Citation[];
  usage: Usage;
  total_ms: number;
}

/** One request's pipeline: the agent graph (dag.ts) on a run (run.ts) that cancels, times, records and reports it. */
export async function runPipeline(
  deps: PipelineDeps,
  request: GenerateRequest,
  selection: Selection,
  graphMoment: GraphMoment | null,
  options: RunOptions = {},
): Promise<PipelineResult> {
  const run = new PipelineRun(deps, selection, request.llm_params, options);
  try {
    const { outputs, image } = await runAgents(run, request, selection, graphMoment);
    return { outputs, image, steps: run.steps, warnings: run.warnings, citations: run.citations, usage: run.usage, total_ms: run.elapsed() };
  } catch (error) {
    throw run.outcomeOf(error);
  } finally {
    run.close();
  }
}
