import { Environment, type JWSTransactionDecodedPayload, SignedDataVerifier, VerificationException, VerificationStatus } from '@apple/app-store-server-library';
import { z } from 'zod';
import type { BillingConfig } from './config.ts';
import { type AppleNotification, interpretNotification, interpretTransaction } from './domain/apple-events.ts';
import type { Catalogue } from './domain/catalogue.ts';
import { type Interpretation, MalformedMessage } from './domain/intents.ts';
import { Refusal } from './refusal.ts';

const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
export const SignedPayloadBody = z.object({ signedPayload: z.string().regex(JWS, 'a compact JWS') });

/** The library's verdicts as the refusal reasons counted in metrics. */
function refusalOf(error: unknown, what: string): Refusal {
  if (!(error instanceof VerificationException)) throw error;
  switch (error.status) {
    case VerificationStatus.INVALID_APP_IDENTIFIER:
      return new Refusal('wrong-app', `${what} is for another app (bundle id or app id)`);
    case VerificationStatus.INVALID_ENVIRONMENT:
      return new Refusal('wrong-environment', `${what} is from another App Store environment`);
    case VerificationStatus.INVALID_CHAIN_LENGTH:
      return new Refusal('bad-chain', `${what} does not carry a chain of exactly three certificates`);
    case VerificationStatus.INVALID_CERTIFICATE:
      // With a cause, a certificate could not be read; without one, a certificate was not valid when the data was signed.
      return error.cause
        ? new Refusal('bad-chain', `${what} carries a certificate that cannot be read`)
        : new Refusal('expired-certificate', `${what} was signed with a certificate outside its validity`);
    case VerificationStatus.FAILURE:
      return new Refusal('malformed-body', `${what} is not App Store signed data`);
    default:
      // A cause is the signature check failing; without one, the chain did not lead to a configured root
      // (or a certificate lacks Apple's marker OIDs).
      return error.cause
        ? new Refusal('bad-signature', `${what}'s signature does not verify`)
        : new Refusal('untrusted-chain', `${what} is not signed through a configured Apple root`);
  }
}

/**
 * In-app purchases through the App Store: StoreKit 2 signed transactions and App Store Server
 * Notifications v2, verified by Apple's own library against the configured roots (online revocation
 * checks off: no network, and the certificates are checked as of the data's signing date).
 */
export class AppleChannel {
  private readonly verifier: SignedDataVerifier | undefined;
  private readonly catalogue: Catalogue;

  constructor(config: BillingConfig, catalogue: Catalogue) {
    this.catalogue = catalogue;
    if (config.APPLE_ROOT_CERTIFICATES.length > 0 && config.APPLE_BUNDLE_ID) {
      const environment = config.APPLE_ENVIRONMENT === 'Sandbox' ? Environment.SANDBOX : Environment.PRODUCTION;
      this.verifier = new SignedDataVerifier(config.APPLE_ROOT_CERTIFICATES, false, environment, config.APPLE_BUNDLE_ID, config.APPLE_APP_APPLE_ID);
    }
  }

  get configured(): boolean {
    return this.verifier !== undefined;
  }

  private get checked(): SignedDataVerifier {
    if (!this.verifier) throw new Error('the App Store is not configured (APPLE_ROOT_CERTIFICATES, APPLE_BUNDLE_ID)');
    return this.verifier;
  }

  async verifyTransaction(signed: string, what = 'the signed transaction'): Promise<JWSTransactionDecodedPayload> {
    if (!JWS.test(signed)) throw new Refusal('malformed-body', `${what} is not a compact JWS`);
    try {
      return await this.checked.verifyAndDecodeTransaction(signed);
    } catch (error) {
      throw refusalOf(error, what);
    }
  }

  /** A transaction the app posted after a purchase, for `userId` (who must be its appAccountToken when it has one). */
  async interpretPosted(transaction: JWSTransactionDecodedPayload, userId: string): Promise<Interpretation> {
    try {
      return interpretTransaction(transaction, this.catalogue, userId, transaction.signedDate ?? Date.now());
    } catch (error) {
      if (error instanceof MalformedMessage) throw new Refusal('malformed-event', error.message);
      throw error;
    }
  }

  /** The notification in `raw` (`{"signedPayload": …}`) with its transaction and renewal info, each verified. */
  async verifyNotification(raw: Buffer): Promise<AppleNotification & { notificationUUID: string }> {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new Refusal('malformed-body', 'the body is not JSON');
    }
    const parsed = SignedPayloadBody.safeParse(body);
    if (!parsed.success) throw new Refusal('malformed-body', 'the body is not {"signedPayload": "<JWS>"}');
    let payload;
    try {
      payload = await this.checked.verifyAndDecodeNotification(parsed.data.signedPayload);
    } catch (error) {
      throw refusalOf(error, 'the notification');
    }
    if (!payload.notificationUUID || !payload.notificationType || payload.signedDate === undefined) {
      throw new Refusal('malformed-event', 'the notification lacks notificationUUID, notificationType or signedDate');
    }
    const transaction = payload.data?.signedTransactionInfo
      ? await this.verifyTransaction(payload.data.signedTransactionInfo, "the notification's transaction")
      : undefined;
    let renewal;
    if (payload.data?.signedRenewalInfo) {
      try {
        renewal = await this.checked.verifyAndDecodeRenewalInfo(payload.data.signedRenewalInfo);
      } catch (error) {
        throw refusalOf(error, "the notification's renewal info");
      }
    }
    return {
      notificationUUID: payload.notificationUUID,
      notificationType: String(payload.notificationType),
      subtype: payload.subtype === undefined ? undefined : String(payload.subtype),
      signedDate: payload.signedDate,
      transaction,
      renewal,
    };
  }

  interpretNotification(notification: AppleNotification): Interpretation {
    try {
      return interpretNotification(notification, this.catalogue);
    } catch (error) {
      if (error instanceof MalformedMessage) throw new Refusal('malformed-event', error.message);
      throw error;
    }
  }
}
