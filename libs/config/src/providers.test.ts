import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { parseProviderSettings } from './providers.js';

const base = { NODE_ENV: 'test' };

describe('provider settings (VLT_<PROVIDER>_*)', () => {
  it('defaults every provider to the real endpoints and reads overrides', () => {
    const { providers, problems } = parseProviderSettings({
      VLT_SUITE_A_TOKEN_URL: 'https://idp.test/token/',
      VLT_LLM_A_API_URL: 'https://llm.test',
    });
    expect(problems).toEqual([]);
    expect(providers.suite_a.tokenUrl).toBe('https://idp.test/token');
    expect(providers.suite_a.authorizeUrl).toMatch(/^https:\/\//);
    expect(providers.llm_a.apiUrl).toBe('https://llm.test');
    expect(providers.llm_a.tokenUrl).toBeUndefined();
    expect(providers.issues.apiUrl).toBeUndefined();
  });

  it.each([
    [{ VLT_SUITE_A_TOKEN_URL: 'http://idp.test/token' }, 'VLT_SUITE_A_TOKEN_URL: must use https'],
    [{ VLT_CODE_HOST_API_URL: 'not a url' }, 'VLT_CODE_HOST_API_URL: not a URL'],
    [{ VLT_LLM_B_API_URL: 'https://llm.test/?region=eu' }, 'VLT_LLM_B_API_URL: must not contain a query'],
    [
      { VLT_NOTES_AUTHORIZE_URL: 'https://u:p@idp.test/a' },
      'VLT_NOTES_AUTHORIZE_URL: must not contain credentials',
    ],
    [
      { VLT_BOARD_CLIENT_ID: 'id-only' },
      'VLT_BOARD_CLIENT_SECRET: required with the other half of the OAuth app',
    ],
    [{ VLT_LLM_A_TOKEN_URL: 'https://x.test' }, 'VLT_LLM_A_TOKEN_URL: llm_a is not connected with OAuth'],
    [{ VLT_SUITEA_API_URL: 'https://x.test' }, 'VLT_SUITEA_API_URL: no provider is called suitea'],
    [
      { VLT_ISSUES_API_URL: 'https://x.test' },
      'VLT_ISSUES_API_URL: each issues connection names its own site',
    ],
  ])('refuses %o, naming the variable', (env, problem) => {
    expect(parseProviderSettings(env).problems).toContain(problem);
  });

  it('stops the process at start with the variable name and never its value', () => {
    const secretish = 'http://sekrit-value.test/token';
    let message = '';
    try {
      loadConfig('all-in-one', { ...base, VLT_SUITE_B_TOKEN_URL: secretish });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('VLT_SUITE_B_TOKEN_URL');
    expect(message).not.toContain('sekrit');
  });

  it('leaves names that are not provider settings alone', () => {
    expect(
      parseProviderSettings({ VLT_PUSH_API_URL: 'https://push.test', VLT_UPSTREAM_TIMEOUT_MS: '5' }).problems,
    ).toEqual([]);
  });
});
