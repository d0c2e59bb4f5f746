import type { SceneRecord } from '../scene.ts';
import type { GenerateRequest } from '../schemas.ts';

/** What submitting a job did: inserted it, or found the job its idempotency key had already submitted. */
export type JobCreation = { created: true; job: JobRow } | { created: false; job: JobRow; fingerprint: string };

export interface JobRow {
  id: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  owner: string | null;
  request: GenerateRequest;
  timepoint_id: string | null;
  error: { status: number; detail: string; agent?: string | null } | null;
  callback_url: string | null;
  callback_status: 'none' | 'pending' | 'delivered' | 'failed';
  callback_attempts: number;
  callback_error: string | null;
  /** The process holding the job's lease: running it, or delivering its callback. */
  owner_instance: string | null;
  lease_token: string | null;
  lease_until: Date | null;
  /** How many times its pipeline was started (at most twice: once, and once more after a lost process). */
  attempts: number;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** A process's hold on a job: every write it makes on the job is fenced by the token. */
export interface JobLease {
  id: string;
  token: string;
}

/** Who takes a job and for how long (Jobs.insert, Jobs.claimExpired). */
export interface LeaseHolder {
  instance: string;
  token: string;
  leaseMs: number;
}

export interface TimepointRow {
  id: string;
  owner: string | null;
  visibility: 'public' | 'private';
  record: SceneRecord;
  created_at: Date;
  updated_at: Date;
}

/** What an account deletion removed, by kind (the `deleted` of its answer). */
export interface OwnerErasure {
  timepoints: number;
  images: number;
  jobs: number;
  idempotency_keys: number;
}

/** A job as the account export lists it: with the request as sent and the Idempotency-Key it came with. */
export type ExportedJob = JobRow & { idempotency_key: string | null };
