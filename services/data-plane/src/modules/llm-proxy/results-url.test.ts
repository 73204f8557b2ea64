import { describe, expect, it } from 'vitest';
import { RawJsonBody } from '../execute/respond.js';
import type { ExecutionResult } from '../execute/service.js';
import { resultsUrlsThroughVault } from './service.js';

const BASE = 'https://api.anthropic.com';
const VAULT = 'https://vault.example/v1/vault/llm/llm_a';
const at = (id: string, base = BASE) => `${base}/v1/messages/batches/${id}/results`;
const result = (body: unknown): ExecutionResult => ({
  model: 'B',
  status: 200,
  headers: { 'content-type': 'application/json' },
  body,
  auditId: '00000000-0000-4000-8000-000000000000',
});

describe('resultsUrlsThroughVault (a message batch names where its results are)', () => {
  it('points one batch, and each batch of a list, at the vault', () => {
    const one = result({ id: 'b1', results_url: at('b1') });
    resultsUrlsThroughVault(one, BASE, VAULT);
    expect(one.body).toEqual({ id: 'b1', results_url: `${VAULT}/v1/messages/batches/b1/results` });
    const list = result({
      data: [
        { id: 'b1', results_url: at('b1') },
        { id: 'b2', results_url: null },
      ],
    });
    resultsUrlsThroughVault(list, BASE, VAULT);
    expect(list.body).toEqual({
      data: [
        { id: 'b1', results_url: `${VAULT}/v1/messages/batches/b1/results` },
        { id: 'b2', results_url: null },
      ],
    });
  });

  it('rewrites a list serialised in the response-filter pool (a large list) too', () => {
    const big = result(new RawJsonBody(JSON.stringify({ data: [{ id: 'b1', results_url: at('b1') }] })));
    resultsUrlsThroughVault(big, BASE, VAULT);
    expect(big.body).toBeInstanceOf(RawJsonBody);
    expect(JSON.parse((big.body as RawJsonBody).json)).toEqual({
      data: [{ id: 'b1', results_url: `${VAULT}/v1/messages/batches/b1/results` }],
    });
  });

  it('regression: a results_url outside the provider API is not relayed, so no SDK takes the agent token there', () => {
    for (const url of [
      at('b1', 'https://elsewhere.example'),
      'https://api.anthropic.com.evil.example/x',
      'x',
    ]) {
      const r = result({ id: 'b1', results_url: url });
      resultsUrlsThroughVault(r, BASE, VAULT);
      expect(r.body, url).toEqual({ id: 'b1', results_url: null });
    }
  });

  it('leaves bodies without batches alone', () => {
    for (const body of [null, 'text', { error: { type: 'not_found_error' } }]) {
      const r = result(body);
      resultsUrlsThroughVault(r, BASE, VAULT);
      expect(r.body).toEqual(body);
    }
  });
});
