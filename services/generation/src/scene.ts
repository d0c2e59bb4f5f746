import { figureEntityId, placeEntityId, type TdfRecord, toTdf } from '@tempora/kit/moments';
import type { Citation, ProviderKind } from '@tempora/kit/providers';
import type { AgentOutput } from './agents/index.ts';
import type { GraphMoment } from './agents/types.ts';
import { MONTHS, slugify } from './agents/world.ts';
import type { Selection } from './models.ts';
import type { SceneOutputs } from './pipeline/dag.ts';
import type { StepRecord } from './pipeline/events.ts';
import { recordedParams } from './pipeline/params.ts';
import type { PipelineResult } from './pipeline/pipeline.ts';
import type { GenerateRequest } from './schemas.ts';

/** The scene record (docs/generation.md, "Scene record"). */
export interface SceneRecord {
  id: string;
  query: string;
  slug: string;
  status: 'completed';
  title: string;
  year: number;
  month: number;
  month_name: string;
  day: number;
  time: string;
  era: string;
  date_precision: string;
  path: string;
  location: AgentOutput<'Timeline'>['location'];
  scene: SceneOutputs['scene'];
  /** Characters' entry merged with its bio. */
  characters: Array<AgentOutput<'Characters'>['characters'][number] & Omit<AgentOutput<'CharacterBio'>, 'name'>>;
  relationships: AgentOutput<'Graph'>['relationships'];
  factions: AgentOutput<'Graph'>['factions'];
  tensions: string[];
  moment: SceneOutputs['moment'];
  camera: SceneOutputs['camera'];
  dialog: AgentOutput<'Dialog'>['lines'];
  critique: SceneOutputs['critique'];
  image_prompt: string | null;
  image_negative_prompt: string | null;
  image_url?: string | null;
  confidence: { overall: number; temporal: number; location: number; characters: number; dialog: number; grounding: number | null };
  sources: Array<{ title: string; url: string; kind: 'graph' | 'grounding' | 'citation' }>;
  facts: string[];
  model_provider: ProviderKind | 'mixed';
  models: {
    text: { provider: ProviderKind; model: string; source: string };
    image: { provider: ProviderKind; model: string } | null;
    image_chain: Array<{ provider: ProviderKind; model: string }>;
    agents: Record<string, { provider: ProviderKind | null; model: string | null }>;
  };
  preset: string;
  model_policy: 'permissive' | null;
  llm_params: Record<string, unknown>;
  timings: { total_ms: number; agents: Record<string, number>; steps: StepRecord[] };
  tokens: { input: number; output: number; thinking: number; total: number };
  warnings: string[];
  visibility: 'public' | 'private';
  request_context: Record<string, unknown> | null;
  owner: string | null;
  graph_moment: string | null;
  created_at: string;
  updated_at: string;
}

const PRECISION: Record<string, number> = { exact: 0.95, day: 0.9, month: 0.75, year: 0.6, approximate: 0.4 };
const round = (value: number) => Math.round(Math.min(1, Math.max(0, value)) * 100) / 100;

export function buildScene(input: {
  id: string;
  request: GenerateRequest;
  selection: Selection;
  result: PipelineResult;
  graphMoment: GraphMoment | null;
  owner: string | null;
  imageUrl: string | null;
  now: Date;
}): SceneRecord {
  const { request, selection, result, graphMoment } = input;
  const o = result.outputs;
  const timeline = o.timeline;
  const characters = withBios(o.characters.characters, o.bios);
  const location = timeline.location;
  const slug = slugify(timeline.event_name || request.query);
  const confidence = confidenceOf(o, characters, graphMoment);
  const { agents, agentMs } = agentTimings(result.steps);
  const providersUsed = new Set(result.steps.filter((step) => step.status === 'completed').map((step) => step.provider));

  const record: SceneRecord = {
    id: input.id,
    query: request.query,
    slug,
    status: 'completed',
    title: o.scene.title,
    year: timeline.year,
    month: timeline.month,
    month_name: MONTHS[timeline.month - 1] as string,
    day: timeline.day,
    time: timeline.time,
    era: timeline.era,
    date_precision: timeline.date_precision,
    path: scenePath(timeline, slug),
    location,
    scene: o.scene,
    characters,
    relationships: o.graph.relationships,
    factions: o.graph.factions,
    tensions: o.graph.tensions,
    moment: o.moment,
    camera: o.camera,
    dialog: o.dialog.lines,
    critique: o.critique,
    image_prompt: o.optimizer?.prompt ?? o.image_prompt?.prompt ?? null,
    image_negative_prompt: o.optimizer?.negative_prompt ?? o.image_prompt?.negative_prompt ?? null,
    confidence,
    sources: sourcesOf(graphMoment, o.grounding, result.citations),
    facts: o.grounding?.facts ?? [],
    model_provider: providersUsed.size === 1 ? ([...providersUsed][0] as ProviderKind) : 'mixed',
    models: {
      text: { provider: selection.text.provider, model: selection.text.model, source: selection.text.source },
      image: result.image ? { provider: result.image.provider, model: result.image.model } : null,
      image_chain: request.generate_image ? selection.images.map(({ provider, model }) => ({ provider, model })) : [],
      agents,
    },
    preset: selection.preset,
    model_policy: selection.policy,
    llm_params: recordedParams(request.llm_params),
    timings: { total_ms: result.total_ms, agents: agentMs, steps: result.steps },
    tokens: { input: result.usage.input_tokens, output: result.usage.output_tokens, thinking: result.usage.thinking_tokens, total: result.usage.total_tokens },
    warnings: result.warnings,
    visibility: request.visibility,
    request_context: request.request_context ?? null,
    owner: input.owner,
    graph_moment: graphMoment?.path ?? null,
    created_at: input.now.toISOString(),
    updated_at: input.now.toISOString(),
  };
  // Image URLs appear only when generate_image is true (platform-interface.md).
  if (request.generate_image) record.image_url = input.imageUrl;
  return record;
}

/** Each character's entry merged with its bio (one per character, in the same order). */
function withBios(characters: AgentOutput<'Characters'>['characters'], bios: SceneOutputs['bios']): SceneRecord['characters'] {
  return characters.map((person, index) => ({
    ...person,
    bio: bios[index]?.bio ?? '',
    appearance: bios[index]?.appearance ?? '',
    motivation: bios[index]?.motivation ?? '',
    speaking_style: bios[index]?.speaking_style ?? '',
  }));
}

/** The scene's place in the browsable tree: date, time, country, region, city, then the event. */
function scenePath(timeline: SceneOutputs['timeline'], slug: string): string {
  const location = timeline.location;
  return [
    timeline.year,
    MONTHS[timeline.month - 1],
    timeline.day,
    timeline.time,
    slugify(location.country),
    slugify(location.region),
    slugify(location.city),
    slug,
  ].join('/');
}

/** The graph's moment, Grounding's sources, then the providers' citations, each URL once. */
function sourcesOf(graphMoment: GraphMoment | null, grounding: SceneOutputs['grounding'], citations: Citation[]): SceneRecord['sources'] {
  const sources: SceneRecord['sources'] = [];
  const seen = new Set<string>();
  const add = (source: Citation, kind: SceneRecord['sources'][number]['kind']) => {
    if (!source.url || seen.has(source.url)) return;
    seen.add(source.url);
    sources.push({ title: source.title, url: source.url, kind });
  };
  if (graphMoment) add({ title: `Tempora graph: ${graphMoment.event_name}`, url: graphMoment.url }, 'graph');
  for (const source of grounding?.sources ?? []) add(source, 'grounding');
  for (const citation of citations) add(citation, 'citation');
  return sources;
}

function confidenceOf(o: SceneOutputs, characters: SceneRecord['characters'], graphMoment: GraphMoment | null): SceneRecord['confidence'] {
  const { critique, timeline } = o;
  const location = timeline.location;
  const grounding = o.grounding ? (o.grounding.verified ? 0.9 : 0.45) : null;
  const temporal = round((PRECISION[timeline.date_precision] ?? 0.5) + (o.grounding?.verified ? 0.05 : 0));
  const knownPlace = !(location.latitude === 0 && location.longitude === 0);
  const locationScore = round(graphMoment ? 0.9 : knownPlace ? 0.75 : 0.3);
  const historical = characters.filter((person) => person.is_historical).length;
  const characterScore = round(characters.length ? 0.4 + 0.5 * (historical / characters.length) : 0.3);
  const dialogScore = round(critique?.dialog_quality ?? 0.5);
  const parts = [temporal, locationScore, characterScore, dialogScore, ...(grounding === null ? [] : [grounding])];
  const mean = parts.reduce((sum, value) => sum + value, 0) / parts.length;
  const overall = round(critique ? (mean + critique.score) / 2 : mean);
  return { overall, temporal, location: locationScore, characters: characterScore, dialog: dialogScore, grounding };
}

/** Each agent's first provider and model, and its wall time from its first call's start to its last call's end. */
function agentTimings(steps: StepRecord[]): { agents: SceneRecord['models']['agents']; agentMs: Record<string, number> } {
  const agents: SceneRecord['models']['agents'] = {};
  const agentMs: Record<string, number> = {};
  for (const step of steps) {
    agents[step.agent] ??= { provider: step.provider, model: step.model };
    agentMs[step.agent] =
      Math.max(agentMs[step.agent] ?? 0, step.started_ms + step.duration_ms) -
      Math.min(...steps.filter((s) => s.agent === step.agent).map((s) => s.started_ms));
  }
  return { agents, agentMs };
}

/** The record as a TDF envelope, hashed with the kit's RFC 8785 canonicalisation (same as the graph service). */
export function sceneTdf(record: SceneRecord, serviceVersion: string): TdfRecord {
  const { owner: _owner, request_context: _context, timings: _timings, tokens: _tokens, warnings: _warnings, ...payload } = record;
  return toTdf({
    id: `timepoint:${record.id}`,
    source: 'tempora-generation',
    timestamp: record.updated_at,
    provenance: {
      service: 'generation',
      service_version: serviceVersion,
      model_provider: record.model_provider,
      text_model: record.models.text.model,
      preset: record.preset,
      model_policy: record.model_policy,
      confidence: record.confidence.overall,
      graph_moment: record.graph_moment,
    },
    payload: payload as unknown as Record<string, unknown>,
    entity_ids: [
      ...record.characters.filter((person) => person.is_historical).map((person) => figureEntityId(person.name)),
      placeEntityId(record.location.country, record.location.region, record.location.city),
    ],
  });
}

/** A list item of the owner's scenes. */
export function sceneSummary(record: SceneRecord) {
  return {
    id: record.id,
    query: record.query,
    title: record.title,
    slug: record.slug,
    path: record.path,
    year: record.year,
    era: record.era,
    location: record.location.name,
    status: record.status,
    visibility: record.visibility,
    preset: record.preset,
    model_provider: record.model_provider,
    image_url: record.image_url ?? null,
    confidence: record.confidence.overall,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}
