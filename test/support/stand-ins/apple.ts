/**
 * A certificate hierarchy shaped like Apple's for App Store signed data: a root, an intermediate marked
 * with Apple's WWDR OID (1.2.840.113635.100.6.2.1) and a leaf marked with the App Store receipt-signing OID
 * (1.2.840.113635.100.6.11.1), all P-256; and JWS signed with the leaf, the chain in `x5c` as the App
 * Store sends it. Nothing leaves the machine: billing is configured with this root instead of Apple's.
 * (@peculiar/x509 resolves its services through tsyringe, which needs the reflect-metadata polyfill.)
 */
import 'reflect-metadata';
import { randomUUID, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { CompactSign, importPKCS8 } from 'jose';

x509.cryptoProvider.set(webcrypto as never);

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
export const WWDR_OID = '1.2.840.113635.100.6.2.1';
export const RECEIPT_SIGNING_OID = '1.2.840.113635.100.6.11.1';
/** An extension whose value is ASN.1 NULL, as Apple's marker extensions are. */
const marker = (oid: string) => new x509.Extension(oid, false, new Uint8Array([0x05, 0x00]));

const DAY = 86_400_000;

export interface Chain {
  root: x509.X509Certificate;
  intermediate: x509.X509Certificate;
  leaf: x509.X509Certificate;
  leafKey: CryptoKey;
}

export interface ChainOptions {
  /** Leave the marker OIDs out (a chain that is not Apple's kind). */
  withoutOids?: boolean;
  /** The leaf's validity (default: a year either side of now). */
  leafNotBefore?: Date;
  leafNotAfter?: Date;
  /** Issue under this root instead of a new one. */
  root?: { certificate: x509.X509Certificate; keys: CryptoKeyPair };
}

async function keys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
}

export async function makeRoot(name = 'Test Apple Root CA - G3'): Promise<{ certificate: x509.X509Certificate; keys: CryptoKeyPair }> {
  const rootKeys = await keys();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=${name}, O=Tempora Test, C=US`,
    notBefore: new Date(Date.now() - 3650 * DAY),
    notAfter: new Date(Date.now() + 3650 * DAY),
    keys: rootKeys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  return { certificate, keys: rootKeys };
}

export async function makeChain(options: ChainOptions = {}): Promise<Chain> {
  const root = options.root ?? (await makeRoot());
  const intermediateKeys = await keys();
  const leafKeys = await keys();
  const intermediate = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'CN=Test Apple Worldwide Developer Relations Certification Authority, O=Tempora Test, C=US',
    issuer: root.certificate.subject,
    notBefore: new Date(Date.now() - 3650 * DAY),
    notAfter: new Date(Date.now() + 3650 * DAY),
    signingKey: root.keys.privateKey,
    publicKey: intermediateKeys.publicKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      ...(options.withoutOids ? [] : [marker(WWDR_OID)]),
    ],
  });
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: '03',
    subject: 'CN=Test Prod ECC Mac App Store and iTunes Store Receipt Signing, O=Tempora Test, C=US',
    issuer: intermediate.subject,
    notBefore: options.leafNotBefore ?? new Date(Date.now() - 365 * DAY),
    notAfter: options.leafNotAfter ?? new Date(Date.now() + 365 * DAY),
    signingKey: intermediateKeys.privateKey,
    publicKey: leafKeys.publicKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      ...(options.withoutOids ? [] : [marker(RECEIPT_SIGNING_OID)]),
    ],
  });
  return { root: root.certificate, intermediate, leaf, leafKey: leafKeys.privateKey };
}

const der = (certificate: x509.X509Certificate) => Buffer.from(certificate.rawData).toString('base64');

/** A compact JWS of `payload` signed by the chain's leaf, with `x5c` as Apple sends it (leaf, intermediate, root). */
export async function signJws(chain: Chain, payload: object, options: { x5c?: string[] } = {}): Promise<string> {
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', chain.leafKey)).toString('base64');
  const key = await importPKCS8(`-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----`, 'ES256');
  return new CompactSign(Buffer.from(JSON.stringify(payload)))
    .setProtectedHeader({ alg: 'ES256', x5c: options.x5c ?? [der(chain.leaf), der(chain.intermediate), der(chain.root)] })
    .sign(key);
}

export const chainX5c = (chain: Chain) => [der(chain.leaf), der(chain.intermediate), der(chain.root)];

export const BUNDLE_ID = 'dev.tempora.app';
export const APP_APPLE_ID = 1234567890;

export interface TransactionFields {
  transactionId?: string;
  originalTransactionId?: string;
  productId: string;
  type?: 'Consumable' | 'Auto-Renewable Subscription';
  appAccountToken?: string;
  expiresDate?: number;
  revocationDate?: number;
  signedDate?: number;
  environment?: string;
  bundleId?: string;
  price?: number;
  currency?: string;
}

/** A StoreKit 2 transaction payload as the App Store signs it. */
export function transaction(fields: TransactionFields): Record<string, unknown> {
  const transactionId = fields.transactionId ?? String(2_000_000_000 + Math.floor(Math.random() * 1e9));
  const signedDate = fields.signedDate ?? Date.now();
  return {
    transactionId,
    originalTransactionId: fields.originalTransactionId ?? transactionId,
    bundleId: fields.bundleId ?? BUNDLE_ID,
    productId: fields.productId,
    purchaseDate: signedDate - 1000,
    originalPurchaseDate: signedDate - 1000,
    quantity: 1,
    type: fields.type ?? 'Consumable',
    inAppOwnershipType: 'PURCHASED',
    signedDate,
    environment: fields.environment ?? 'Sandbox',
    transactionReason: 'PURCHASE',
    storefront: 'USA',
    storefrontId: '143441',
    price: fields.price ?? 4990,
    currency: fields.currency ?? 'USD',
    ...(fields.appAccountToken ? { appAccountToken: fields.appAccountToken } : {}),
    ...(fields.expiresDate !== undefined ? { expiresDate: fields.expiresDate, webOrderLineItemId: randomUUID() } : {}),
    ...(fields.revocationDate !== undefined ? { revocationDate: fields.revocationDate, revocationReason: 0 } : {}),
  };
}

/** A signed App Store Server Notification v2 body (`{"signedPayload": …}`). */
export async function notificationBody(
  chain: Chain,
  fields: {
    type: string;
    subtype?: string;
    uuid?: string;
    signedDate?: number;
    signedTransaction?: string;
    signedRenewal?: string;
    environment?: string;
    bundleId?: string;
  },
): Promise<string> {
  const payload = {
    notificationType: fields.type,
    ...(fields.subtype ? { subtype: fields.subtype } : {}),
    notificationUUID: fields.uuid ?? randomUUID(),
    version: '2.0',
    signedDate: fields.signedDate ?? Date.now(),
    data: {
      appAppleId: APP_APPLE_ID,
      bundleId: fields.bundleId ?? BUNDLE_ID,
      bundleVersion: '1',
      environment: fields.environment ?? 'Sandbox',
      ...(fields.signedTransaction ? { signedTransactionInfo: fields.signedTransaction } : {}),
      ...(fields.signedRenewal ? { signedRenewalInfo: fields.signedRenewal } : {}),
      status: 1,
    },
  };
  return JSON.stringify({ signedPayload: await signJws(chain, payload) });
}

export const pemOf = (certificate: x509.X509Certificate) => certificate.toString('pem');
