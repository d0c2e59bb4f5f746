/** What services share about moments: canonical paths and the TDF record format. */
export * from './canonical-path.ts';
export * from './tdf.ts';
