import type { JobRow } from './repository/index.ts';

/** A job as `GET /api/v1/timepoints/jobs/{job_id}` answers it (and the account export lists it). */
export function jobView(job: JobRow) {
  return {
    job_id: job.id,
    status: job.status,
    timepoint_id: job.timepoint_id,
    timepoint_url: job.timepoint_id ? `/api/v1/timepoints/${job.timepoint_id}` : null,
    error: job.error,
    callback: job.callback_url ? { url: job.callback_url, status: job.callback_status, attempts: job.callback_attempts, error: job.callback_error } : null,
    created_at: new Date(job.created_at).toISOString(),
    updated_at: new Date(job.updated_at).toISOString(),
    finished_at: job.finished_at ? new Date(job.finished_at).toISOString() : null,
  };
}
