/**
 * Input that cannot be verified (a bad or stale signature, a foreign certificate chain, another app's or
 * environment's data, a malformed body): answered 400 and counted by `reason`, never granting anything.
 */
export class Refusal extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}
