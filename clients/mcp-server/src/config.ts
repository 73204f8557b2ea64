/**
 * vlt-mcp's configuration, read once at start from flags and the environment and checked with
 * zod. Secrets (the agent key, the HTTP bearer secret) come only from the environment or a file,
 * never from flags: a command line is visible to every local user in the process list. No error
 * message quotes a value, only the setting's name.
 */
import { isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { decodeAgentPrivateKey, type AgentPrivateJwk } from './agent-key.js';
import { ConfigError } from './errors.js';
import type { LogLevel } from './log.js';

export type TransportConfig =
  | { kind: 'stdio' }
  | {
      kind: 'http';
      host: string;
      /** 0 picks a free port; the address is logged at start. */
      port: number;
      /** Bearer secret HTTP clients must present; undefined only for an explicit unauthenticated loopback. */
      token: string | undefined;
      /** Host header hostnames accepted (DNS rebinding defence), lower-case, IPv6 in brackets. */
      allowedHosts: string[];
      /** Origin header values accepted; a request with any other Origin is refused. */
      allowedOrigins: string[];
    };

export interface VaultMcpConfig {
  baseUrl: string;
  agentId: string;
  /** The agent's private key; import it and drop this object (see `importAgentPrivateKey`). */
  agentKey: AgentPrivateJwk;
  /** The assertion audience when the vault sets AGENT_TOKEN_AUDIENCE; default: baseUrl. */
  tokenAudience: string | undefined;
  /** Absolute directory `vault_download` writes into (created 0700 on first use). */
  downloadDir: string;
  /** How often `vault_await_approval` polls the approval. */
  approvalPollMs: number;
  logLevel: LogLevel;
  transport: TransportConfig;
}

export type ParsedCommandLine = { kind: 'help' } | { kind: 'run'; config: VaultMcpConfig };

export interface ConfigIo {
  readFile(path: string): string;
  homedir(): string;
  cwd(): string;
}

export const USAGE = `vlt-mcp: the vault's agent tools over the Model Context Protocol.

Usage: vlt-mcp [--stdio] | --http --port N [--host 127.0.0.1] [options]

Transport:
  --stdio                            serve one client on stdin/stdout (default)
  --http                             serve streamable HTTP on http://HOST:PORT/mcp
  --port N                           HTTP port (0: any free port, logged at start)
  --host ADDR                        HTTP bind address (default 127.0.0.1)
  --allowed-host NAME                extra Host header name to accept (repeatable)
  --allowed-origin ORIGIN            Origin to accept from browsers (repeatable; default none)
  --allow-unauthenticated-loopback   serve HTTP without VLT_MCP_HTTP_TOKEN (loopback only)

Vault:
  --base-url URL                     or VLT_BASE_URL
  --agent-id ID                      or VLT_AGENT_ID
  --download-dir DIR                 or VLT_MCP_DOWNLOAD_DIR (default ~/.vlt/mcp-downloads)
  --allow-insecure-base-url          accept an http:// vault that is not on loopback

Environment (secrets are read only from here):
  VLT_AGENT_PRIVATE_KEY              base64 of the agent's private ES256 JWK
  VLT_AGENT_PRIVATE_KEY_FILE         or a file holding it
  VLT_TOKEN_AUDIENCE                 token audience, when the vault sets one (default: base URL)
  VLT_MCP_HTTP_TOKEN                 bearer secret HTTP clients must send (at least 32 characters)
  VLT_MCP_ALLOWED_HOSTS, VLT_MCP_ALLOWED_ORIGINS   comma-separated, like the flags
  VLT_MCP_APPROVAL_POLL_MS           approval polling interval (default 3000)
  VLT_MCP_LOG_LEVEL                  silent, error, warn, info (default), debug; logs go to stderr
`;

const LOOPBACK_NAMES = new Set(['localhost', '::1', '[::1]']);

/** 127.0.0.0/8, ::1 and localhost: addresses only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return LOOPBACK_NAMES.has(h) || /^127(?:\.\d{1,3}){3}$/.test(h);
}

/** A Host header's hostname as it is compared: lower-case, IPv6 in brackets, no port. */
export function normaliseHostname(host: string): string {
  const h = host.trim().toLowerCase();
  return h.includes(':') && !h.startsWith('[') ? `[${h}]` : h;
}

const MIN_HTTP_TOKEN_LENGTH = 32;

const Env = z.object({
  VLT_BASE_URL: z.string().optional(),
  VLT_AGENT_ID: z.string().optional(),
  VLT_AGENT_PRIVATE_KEY: z.string().optional(),
  VLT_AGENT_PRIVATE_KEY_FILE: z.string().optional(),
  VLT_TOKEN_AUDIENCE: z.string().optional(),
  VLT_MCP_HTTP_TOKEN: z.string().optional(),
  VLT_MCP_DOWNLOAD_DIR: z.string().optional(),
  VLT_MCP_ALLOWED_HOSTS: z.string().optional(),
  VLT_MCP_ALLOWED_ORIGINS: z.string().optional(),
  VLT_MCP_APPROVAL_POLL_MS: z.string().optional(),
  VLT_MCP_LOG_LEVEL: z.string().optional(),
});

const Settings = z.object({
  baseUrl: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .transform((u) => u.replace(/\/+$/, '')),
  agentId: z.uuid({ error: 'must be the agent id (a UUID)' }),
  tokenAudience: z.string().min(1).max(2000).optional(),
  downloadDir: z.string().min(1),
  approvalPollMs: z.coerce.number().int().min(50).max(60_000),
  logLevel: z.enum(['silent', 'error', 'warn', 'info', 'debug']),
  port: z.coerce.number().int().min(0).max(65_535).optional(),
  host: z.string().min(1).max(255),
});

/** Names of the settings as a user spells them, for error messages. */
const SETTING_NAMES: Record<string, string> = {
  baseUrl: '--base-url / VLT_BASE_URL',
  agentId: '--agent-id / VLT_AGENT_ID',
  tokenAudience: 'VLT_TOKEN_AUDIENCE',
  downloadDir: '--download-dir / VLT_MCP_DOWNLOAD_DIR',
  approvalPollMs: 'VLT_MCP_APPROVAL_POLL_MS',
  logLevel: 'VLT_MCP_LOG_LEVEL',
  port: '--port',
  host: '--host',
};

const list = (csv: string | undefined): string[] =>
  (csv ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function parseFlags(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        stdio: { type: 'boolean' },
        http: { type: 'boolean' },
        port: { type: 'string' },
        host: { type: 'string' },
        'allowed-host': { type: 'string', multiple: true },
        'allowed-origin': { type: 'string', multiple: true },
        'allow-unauthenticated-loopback': { type: 'boolean' },
        'allow-insecure-base-url': { type: 'boolean' },
        'base-url': { type: 'string' },
        'agent-id': { type: 'string' },
        'download-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (err) {
    const code = (err as { code?: string }).code;
    // The positional's text is quoted in Node's message, and it might be a pasted secret.
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      throw new ConfigError('vlt-mcp takes no positional arguments (see --help)');
    }
    throw new ConfigError(`${(err as Error).message} (see --help)`);
  }
}

/** An allowed Origin: scheme, host and port only, as browsers send it. */
function parseOrigin(value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(`allowed origin "${value}" is not a URL origin`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.origin !== value.replace(/\/$/, '')) {
    throw new ConfigError(`allowed origin "${value}" must be scheme://host[:port], nothing else`);
  }
  return u.origin;
}

export function parseConfig(
  argv: readonly string[],
  rawEnv: Record<string, string | undefined>,
  io: ConfigIo,
): ParsedCommandLine {
  const flags = parseFlags(argv);
  if (flags.help) return { kind: 'help' };
  const env = Env.parse(rawEnv);

  const raw: Record<string, unknown> = {
    baseUrl: flags['base-url'] ?? env.VLT_BASE_URL,
    agentId: flags['agent-id'] ?? env.VLT_AGENT_ID,
    tokenAudience: env.VLT_TOKEN_AUDIENCE || undefined,
    downloadDir:
      flags['download-dir'] ?? env.VLT_MCP_DOWNLOAD_DIR ?? join(io.homedir(), '.vlt', 'mcp-downloads'),
    approvalPollMs: env.VLT_MCP_APPROVAL_POLL_MS ?? 3000,
    logLevel: env.VLT_MCP_LOG_LEVEL ?? 'info',
    port: flags.port,
    host: flags.host ?? '127.0.0.1',
  };
  const parsed = Settings.safeParse(raw);
  if (!parsed.success) {
    // Only the setting and zod's rule: zod v4 messages do not quote the input.
    const lines = parsed.error.issues.map((i) => {
      const key = String(i.path[0] ?? '');
      return `${SETTING_NAMES[key] ?? key}: ${raw[key] === undefined ? 'is required' : i.message}`;
    });
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const s = parsed.data;

  const base = new URL(s.baseUrl);
  if (base.protocol === 'http:' && !isLoopbackHost(base.hostname) && !flags['allow-insecure-base-url']) {
    // The agent's access tokens would cross the network in clear text.
    throw new ConfigError(
      'the vault base URL is plain http on a non-loopback host: use https (or --allow-insecure-base-url)',
    );
  }

  const agentKey = readAgentKey(env, io);
  const downloadDir = isAbsolute(s.downloadDir) ? s.downloadDir : resolve(io.cwd(), s.downloadDir);

  if (flags.stdio && flags.http) throw new ConfigError('choose one transport: --stdio or --http');
  let transport: TransportConfig = { kind: 'stdio' };
  if (flags.http) {
    if (s.port === undefined) throw new ConfigError('--http needs --port (0 picks a free port)');
    transport = httpTransport(s.host, s.port, flags, env);
  } else {
    const httpOnly = [
      'port',
      'host',
      'allowed-host',
      'allowed-origin',
      'allow-unauthenticated-loopback',
    ] as const;
    const stray = httpOnly.filter((f) => flags[f] !== undefined);
    if (stray.length) throw new ConfigError(`only with --http: --${stray.join(', --')}`);
  }

  return {
    kind: 'run',
    config: {
      baseUrl: s.baseUrl,
      agentId: s.agentId,
      agentKey,
      tokenAudience: s.tokenAudience,
      downloadDir,
      approvalPollMs: s.approvalPollMs,
      logLevel: s.logLevel,
      transport,
    },
  };
}

function readAgentKey(env: z.infer<typeof Env>, io: ConfigIo): AgentPrivateJwk {
  const inline = env.VLT_AGENT_PRIVATE_KEY;
  const file = env.VLT_AGENT_PRIVATE_KEY_FILE;
  if (inline && file) {
    throw new ConfigError('set VLT_AGENT_PRIVATE_KEY or VLT_AGENT_PRIVATE_KEY_FILE, not both');
  }
  if (inline) return decodeAgentPrivateKey(inline, 'VLT_AGENT_PRIVATE_KEY');
  if (file) {
    let text: string;
    try {
      text = io.readFile(file);
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'unreadable';
      throw new ConfigError(`VLT_AGENT_PRIVATE_KEY_FILE cannot be read (${code})`);
    }
    return decodeAgentPrivateKey(text, 'VLT_AGENT_PRIVATE_KEY_FILE');
  }
  throw new ConfigError(
    'the agent private key is required: set VLT_AGENT_PRIVATE_KEY or VLT_AGENT_PRIVATE_KEY_FILE',
  );
}

function httpTransport(
  host: string,
  port: number,
  flags: ReturnType<typeof parseFlags>,
  env: z.infer<typeof Env>,
): TransportConfig {
  const token = env.VLT_MCP_HTTP_TOKEN || undefined;
  const loopback = isLoopbackHost(host);
  if (token === undefined) {
    // Whoever reaches the endpoint acts as the agent: without a secret, only this machine may,
    // and only when the operator says so in as many words.
    if (!loopback || !flags['allow-unauthenticated-loopback']) {
      throw new ConfigError(
        'HTTP needs VLT_MCP_HTTP_TOKEN (a bearer secret of at least 32 characters); ' +
          'without one, vlt-mcp serves only on a loopback --host with --allow-unauthenticated-loopback',
      );
    }
  } else if (token.length < MIN_HTTP_TOKEN_LENGTH || /\s/.test(token)) {
    throw new ConfigError(
      `VLT_MCP_HTTP_TOKEN must be at least ${MIN_HTTP_TOKEN_LENGTH} characters without spaces`,
    );
  }

  const extraHosts = [...(flags['allowed-host'] ?? []), ...list(env.VLT_MCP_ALLOWED_HOSTS)].map(
    normaliseHostname,
  );
  const wildcard = host === '0.0.0.0' || host === '::' || host === '[::]';
  if (wildcard && extraHosts.length === 0) {
    throw new ConfigError(
      `--host ${host} listens on every address: name the Host values clients use with --allowed-host`,
    );
  }
  const own = wildcard
    ? []
    : loopback
      ? ['localhost', '127.0.0.1', '[::1]', normaliseHostname(host)]
      : [normaliseHostname(host)];
  const allowedOrigins = [...(flags['allowed-origin'] ?? []), ...list(env.VLT_MCP_ALLOWED_ORIGINS)].map(
    parseOrigin,
  );
  return {
    kind: 'http',
    host,
    port,
    token,
    allowedHosts: [...new Set([...own, ...extraHosts])],
    allowedOrigins: [...new Set(allowedOrigins)],
  };
}
