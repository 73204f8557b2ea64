/**
 * The vault plugin, independent of any host: one SDK client (tokens, refresh-once, typed
 * errors), the transport that adds the session headers, the approval book and its watcher, and
 * the seven tools bound to a session. `openclaw.ts` connects it to OpenClaw; tests drive it
 * directly. Creating it does no I/O: the first tool call fetches the first token.
 */
import { generateKeyPairSync } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { createAgentClient, type FetchLike } from '@vlt/sdk';
import { ApprovalBook, type ApprovalWakeEvent } from './approvals.js';
import { DEFAULT_WATCHER_POLL_MS, type ResolvedConfig } from './config.js';
import { DEFAULT_MAX_DOWNLOAD_BYTES } from './download.js';
import { toPluginError } from './errors.js';
import type { VaultContext } from './execution.js';
import { createLog, type LogSink } from './log.js';
import { sessionKeyHeader, type SessionRef } from './session.js';
import { TOOL_NAMES, createTools, type VaultTool } from './tools.js';
import { createTransport } from './transport.js';

export interface VaultPluginOptions {
  config: ResolvedConfig;
  /** The fetch every vault request goes through (tests record or answer requests with it). */
  fetch?: FetchLike;
  /** The watcher's poll interval; the OpenClaw entry passes `WATCHER_POLL_MS`. */
  watcherPollMs?: number;
  /** Wakes the agent when an approval of an ordinary request is decided. */
  wake?: (event: ApprovalWakeEvent) => void;
  log?: LogSink;
  /** Where vault_download writes; default `<workspace>/vault-downloads`, else `~/.vlt/agent-downloads`. */
  downloadDir?: (session: SessionRef) => string;
  maxDownloadBytes?: number;
}

export interface VaultPlugin {
  readonly toolNames: readonly string[];
  /** The seven tools, bound to the session they run for. */
  tools(session: SessionRef): VaultTool[];
  /** Replays decided model-call approvals of `session`; the text to add to its turn, if any. */
  nextUserTurn(session: SessionRef, signal?: AbortSignal): Promise<string | undefined>;
  /** Watches an approval the host learned of outside the tools (a model call through the LLM proxy). */
  trackApproval(approvalRequestId: string, session: SessionRef): void;
  /** The agent's current access token, for the host's model calls through the LLM proxy. */
  accessToken(): Promise<string>;
  /** Stops the watcher; pending approvals are no longer followed. */
  close(): void;
}

function defaultDownloadDir(session: SessionRef): string {
  return session.workspaceDir
    ? path.join(session.workspaceDir, 'vault-downloads')
    : path.join(os.homedir(), '.vlt', 'agent-downloads');
}

/** A throwaway signing key for bearer mode: the SDK wants one, the local token endpoint ignores it. */
function unusedSigningKey(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

export function createVaultPlugin(o: VaultPluginOptions): VaultPlugin {
  const { config } = o;
  const log = createLog(config.debugLevel, o.log);
  const auth = config.auth;
  const transport = createTransport({
    baseUrl: config.baseUrl,
    fetch: o.fetch ?? globalThis.fetch,
    bearerToken: auth.mode === 'bearer' ? auth.token : undefined,
  });
  const client = createAgentClient({
    baseUrl: config.baseUrl,
    agentId: auth.mode === 'agent' ? auth.agentId : 'bearer-token',
    privateKey: auth.mode === 'agent' ? auth.privateKeyPem.reveal() : unusedSigningKey(),
    ...(auth.mode === 'agent' && { audience: auth.tokenAudience }),
    fetch: transport.fetch,
  });
  const errorAuth = { mode: auth.mode, agentId: auth.mode === 'agent' ? auth.agentId : undefined };

  const vault: VaultContext = {
    client,
    transport,
    config,
    log,
    call: (session, fn, scope = {}) =>
      transport.run(
        { ...scope, sessionKey: session ? sessionKeyHeader(session) : undefined },
        async (observed) => {
          try {
            return await fn();
          } catch (err) {
            throw toPluginError(err, observed, errorAuth);
          }
        },
      ),
    downloadDir: o.downloadDir ?? defaultDownloadDir,
    maxDownloadBytes: o.maxDownloadBytes ?? DEFAULT_MAX_DOWNLOAD_BYTES,
  };

  const approvals = new ApprovalBook(vault, {
    watcherPollMs: o.watcherPollMs ?? DEFAULT_WATCHER_POLL_MS,
    wake: (event) => {
      if (o.wake) o.wake(event);
      else log.info(event.text);
    },
  });

  return {
    toolNames: TOOL_NAMES,
    tools: (session) => createTools({ vault, approvals }, session),
    nextUserTurn: (session, signal) => approvals.nextUserTurn(session, signal),
    trackApproval: (id, session) => approvals.watch(id, session),
    accessToken: () => vault.call(undefined, () => client.accessToken()),
    close: () => approvals.close(),
  };
}
