import { createHash, randomBytes } from 'node:crypto';

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** An opaque secret with a recognisable prefix (secret scanners and humans can tell what leaked). */
export const opaqueSecret = (prefix: string, bytes = 32) => `${prefix}${randomBytes(bytes).toString('base64url')}`;

export const REFRESH_TOKEN_PREFIX = 'tmr_';
export const API_KEY_PREFIX = 'tmk_';
/** Characters of an API key shown in listings: the prefix and the first 8 random characters. */
export const API_KEY_VISIBLE = API_KEY_PREFIX.length + 8;
