import { notFound } from '@tempora/kit/http';
import { FREE_IMAGE_KEYWORD, IMAGE_VENDOR, IMAGE_VENDOR_MODELS } from '@tempora/kit/providers';
import type { Generator } from '../generator.ts';
import { PERMISSIVE_IMAGE_MODEL, PRESET_MODELS, type Selection } from '../models.ts';
import type { RunOptions } from '../pipeline/run.ts';
import type { ProviderSet } from '../providers.ts';
import type { GenerationRepository, JobRow } from '../repository/index.ts';
import type { SceneRecord } from '../scene.ts';
import { type GenerateRequest, PRESETS } from '../schemas.ts';

export interface GenerationServiceDeps {
  generator: Generator;
  repository: GenerationRepository;
  providers: ProviderSet;
  permissiveTextModel: string;
}

/** Who reads a job: the user the request is for (null when none), and whether a service acts as itself. */
export interface JobReader {
  user: string | null;
  service: boolean;
}

/**
 * What the generation routes do, without Koa: admitting a request, a generation the caller waits for or
 * follows, an asynchronous job and its status, and the models this server offers. The runs themselves,
 * the jobs' leases and callbacks are the generator's.
 */
export class GenerationService {
  private readonly deps: GenerationServiceDeps;

  constructor(deps: GenerationServiceDeps) {
    this.deps = deps;
  }

  /** Refuses new work on a stopping replica (503), then checks the request and chooses its models (422 naming the field). */
  admit(request: GenerateRequest, owner: string | null): Selection {
    this.deps.generator.admit();
    return this.deps.generator.prepare(request, owner);
  }

  /** Runs the pipeline for a caller who waits for the scene (sync) or follows its agents (stream), and stores it. */
  generate(request: GenerateRequest, selection: Selection, owner: string | null, mode: 'sync' | 'stream', options: RunOptions): Promise<SceneRecord> {
    return this.deps.generator.generate(request, selection, owner, mode, options);
  }

  /** Starts an asynchronous generation, or finds the job its Idempotency-Key submitted (`replayed`). */
  submit(request: GenerateRequest, owner: string | null, idempotencyKey?: string): Promise<{ job: JobRow; replayed: boolean }> {
    return this.deps.generator.submit(request, owner, idempotencyKey);
  }

  /** A job with an owner is that owner's, and a service's acting as itself; anyone else is told there is none. */
  async job(id: string, reader: JobReader): Promise<JobRow> {
    const job = await this.deps.repository.jobs.get(id);
    if (!job || (job.owner && job.owner !== reader.user && !reader.service)) throw notFound(`no job ${id}`);
    return job;
  }

  /** The presets, providers and image models this server offers: what a request may name here. */
  models() {
    const { defaults } = this.deps.generator;
    return {
      providers: { ...this.deps.providers.configured },
      presets: PRESETS.map((name) => ({
        name,
        ...PRESET_MODELS[name],
        ...(defaults.presets?.[name] ? { override: defaults.presets[name] } : {}),
        default: name === (defaults.defaultPreset ?? 'balanced'),
        allowed: !defaults.allowed || defaults.allowed.includes(name),
      })),
      permissive: { text_model: this.deps.permissiveTextModel, image_model: PERMISSIVE_IMAGE_MODEL },
      image_models: [...IMAGE_VENDOR_MODELS.map((model) => `${IMAGE_VENDOR}/${model}`), FREE_IMAGE_KEYWORD],
    };
  }
}
