import { describe, expect, it } from 'vitest';
import {
  actionTemplates,
  defaultAllowlistFor,
  PROVIDERS,
  SERVICES,
  serviceExtras,
  serviceSpec,
} from './catalog.js';
import { AllowlistEntry } from './policy.js';

describe('service catalog', () => {
  it('names every service of the interface once, each on a known provider', () => {
    expect(SERVICES.map((s) => s.id).sort()).toEqual(
      [
        'board-boards',
        'chatbot_a',
        'chatbot_b',
        'code_host-repos',
        'issues',
        'llm_a-messages',
        'llm_b-chat',
        'llm_c-generate',
        'llm_d-chat',
        'notes-pages',
        'suite_a-calendar',
        'suite_a-contacts',
        'suite_a-drive',
        'suite_a-mail',
        'suite_b-drive',
        'suite_b-mail',
        'suite_b-teams',
      ].sort(),
    );
    for (const s of SERVICES) expect(PROVIDERS[s.provider].authKind).toBe(s.authKind);
  });

  it('marks exactly the singletons of the interface', () => {
    expect(
      SERVICES.filter((s) => s.singleton)
        .map((s) => s.id)
        .sort(),
    ).toEqual(
      ['chatbot_a', 'chatbot_b', 'llm_a-messages', 'llm_b-chat', 'llm_c-generate', 'llm_d-chat'].sort(),
    );
  });

  it('vends (Model A) only OAuth services, never the issue tracker nor contacts (brokered only)', () => {
    for (const s of SERVICES) expect(s.vendable).toBe(s.authKind === 'oauth' && s.id !== 'suite_a-contacts');
    expect(serviceSpec('issues')?.vendable).toBe(false);
    expect(serviceSpec('suite_a-contacts')?.vendable).toBe(false);
  });

  it('gives every service a default allowlist that the policy schema accepts on its API URL', () => {
    for (const s of SERVICES) {
      const base = PROVIDERS[s.provider].defaults?.apiUrl ?? 'https://tracker.example';
      const entries = defaultAllowlistFor(s, base);
      expect(entries.length, s.id).toBeGreaterThan(0);
      for (const e of entries)
        expect(AllowlistEntry.safeParse(e).success, `${s.id} ${JSON.stringify(e)}`).toBe(true);
    }
  });

  it('gives every service action templates with unique ids', () => {
    for (const s of SERVICES) expect(serviceExtras(s.id).actions.length, s.id).toBeGreaterThan(0);
    const ids = actionTemplates().map((a) => a.id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
