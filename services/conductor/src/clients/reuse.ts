/** The kit's answers kept for a while (concurrent askers share a call; failures are not kept). */
export { Reuse } from '@tempora/kit/http';
