import assert from 'node:assert/strict';
import { loadConfig } from '@tempora/kit/runtime';
import { makeChain, pemOf } from '../../../test/support/stand-ins/apple.ts';
import { BillingConfigSchema } from '../src/config.ts';

const load = (env: Record<string, string>) => () => loadConfig(BillingConfigSchema, env);

describe('billing configuration', () => {
  it('starts with nothing set: the default catalogue, no channel configured', () => {
    const config = loadConfig(BillingConfigSchema, {});
    assert.equal(config.PORT, 8085);
    assert.equal(config.BILLING_CATALOGUE.packs.length, 3);
    assert.deepEqual(config.STRIPE_WEBHOOK_SECRET, []);
    assert.deepEqual(config.APPLE_ROOT_CERTIFICATES, []);
  });

  it('names every variable that is wrong', () => {
    assert.throws(load({ STRIPE_SECRET_KEY: 'sk_test_x' }), /CHECKOUT_SUCCESS_URL/);
    assert.throws(load({ BILLING_CATALOGUE: '{"packs": [], "plans": [{"id": "x"}]}' }), /BILLING_CATALOGUE/);
    assert.throws(load({ BILLING_CATALOGUE: '/nonexistent/catalogue.json' }), /BILLING_CATALOGUE: not a readable JSON catalogue/);
    assert.throws(load({ APPLE_ROOT_CERTIFICATES: '-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----' }), /APPLE_ROOT_CERTIFICATES/);
    assert.throws(load({ APPLE_ENVIRONMENT: 'Xcode' }), /APPLE_ENVIRONMENT/, 'unsigned Xcode data would skip verification');
  });

  it('needs a bundle id with Apple roots, and the app id in production', async () => {
    const pem = pemOf((await makeChain()).root);
    assert.throws(load({ APPLE_ROOT_CERTIFICATES: pem, APPLE_ENVIRONMENT: 'Sandbox' }), /APPLE_BUNDLE_ID/);
    assert.throws(load({ APPLE_ROOT_CERTIFICATES: pem, APPLE_BUNDLE_ID: 'dev.tempora.app' }), /APPLE_APP_APPLE_ID/);
    const config = loadConfig(BillingConfigSchema, { APPLE_ROOT_CERTIFICATES: pem, APPLE_BUNDLE_ID: 'dev.tempora.app', APPLE_APP_APPLE_ID: '123' });
    assert.equal(config.APPLE_ROOT_CERTIFICATES.length, 1);
  });
});
