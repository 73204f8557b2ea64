/**
 * Provider endpoints and the deployment's OAuth apps, from `VLT_<PROVIDER>_*`. A variable that
 * is set but cannot be used (not https, a half-configured OAuth app, an endpoint a provider of
 * that kind does not have, a provider name that does not exist) stops the process at start with
 * the variable's name: a silently ignored variable would send tokens somewhere unexpected.
 */
import { PROVIDER_IDS, PROVIDERS, type ProviderId } from '@vlt/contracts';

export interface ProviderEndpoints {
  authorizeUrl: string | undefined;
  tokenUrl: string | undefined;
  revokeUrl: string | undefined;
  apiUrl: string | undefined;
  /** The deployment's OAuth app; a workspace's own app takes precedence. */
  clientId: string | undefined;
  clientSecret: string | undefined;
}

export type ProviderSettings = Readonly<Record<ProviderId, Readonly<ProviderEndpoints>>>;

const SUFFIXES = [
  'AUTHORIZE_URL',
  'TOKEN_URL',
  'REVOKE_URL',
  'API_URL',
  'CLIENT_ID',
  'CLIENT_SECRET',
] as const;
/** `VLT_*_API_URL`-shaped names that belong to something other than a provider. */
const NOT_PROVIDERS = new Set(['VLT_PUSH_API_URL']);

function httpsUrl(name: string, raw: string, problems: string[], origin = false): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`${name}: not a URL`);
    return undefined;
  }
  if (url.protocol !== 'https:') problems.push(`${name}: must use https`);
  else if (url.username || url.password) problems.push(`${name}: must not contain credentials`);
  else if (url.hash) problems.push(`${name}: must not contain a fragment`);
  // An API URL is where allowlists are rooted: an origin and perhaps a path, never a query.
  else if (origin && url.search) problems.push(`${name}: must not contain a query`);
  else return raw.replace(/\/+$/, '');
  return undefined;
}

/** Returns the settings and every problem found (each naming its variable, never its value). */
export function parseProviderSettings(env: Record<string, string | undefined>): {
  providers: ProviderSettings;
  problems: string[];
} {
  const problems: string[] = [];
  const known = new Set<string>(PROVIDER_IDS.map((p) => PROVIDERS[p].envPrefix));
  for (const name of Object.keys(env)) {
    const suffix = SUFFIXES.find((s) => name.endsWith(`_${s}`));
    if (!suffix || !name.startsWith('VLT_') || NOT_PROVIDERS.has(name)) continue;
    const prefix = name.slice(0, -(suffix.length + 1));
    if (!known.has(prefix)) problems.push(`${name}: no provider is called ${prefix.slice(4).toLowerCase()}`);
  }

  const out = {} as Record<ProviderId, ProviderEndpoints>;
  for (const id of PROVIDER_IDS) {
    const spec = PROVIDERS[id];
    const get = (s: (typeof SUFFIXES)[number]) => {
      const v = env[`${spec.envPrefix}_${s}`]?.trim();
      return v === '' ? undefined : v;
    };
    const url = (s: (typeof SUFFIXES)[number], fallback: string | undefined) => {
      const raw = get(s);
      return raw === undefined
        ? fallback
        : httpsUrl(`${spec.envPrefix}_${s}`, raw, problems, s === 'API_URL');
    };
    if (spec.authKind !== 'oauth') {
      for (const s of ['AUTHORIZE_URL', 'TOKEN_URL', 'REVOKE_URL', 'CLIENT_ID', 'CLIENT_SECRET'] as const) {
        if (get(s) !== undefined) problems.push(`${spec.envPrefix}_${s}: ${id} is not connected with OAuth`);
      }
    }
    if (spec.defaults === null && get('API_URL') !== undefined) {
      problems.push(`${spec.envPrefix}_API_URL: each ${id} connection names its own site`);
    }
    const clientId = get('CLIENT_ID');
    const clientSecret = get('CLIENT_SECRET');
    if (spec.authKind === 'oauth' && (clientId === undefined) !== (clientSecret === undefined)) {
      const missing = clientId === undefined ? 'CLIENT_ID' : 'CLIENT_SECRET';
      problems.push(`${spec.envPrefix}_${missing}: required with the other half of the OAuth app`);
    }
    const d = spec.defaults;
    out[id] = Object.freeze({
      authorizeUrl: spec.authKind === 'oauth' ? url('AUTHORIZE_URL', d?.authorizeUrl) : undefined,
      tokenUrl: spec.authKind === 'oauth' ? url('TOKEN_URL', d?.tokenUrl) : undefined,
      revokeUrl: spec.authKind === 'oauth' ? url('REVOKE_URL', d?.revokeUrl) : undefined,
      apiUrl: d ? url('API_URL', d.apiUrl) : undefined,
      clientId: spec.authKind === 'oauth' ? clientId : undefined,
      clientSecret: spec.authKind === 'oauth' ? clientSecret : undefined,
    });
  }
  return { providers: Object.freeze(out), problems };
}
