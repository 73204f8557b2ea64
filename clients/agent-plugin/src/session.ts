/**
 * Which agent session a tool call belongs to, as the host reports it, and the
 * `x-vlt-session-key` header value naming it: `agent:<agentId>:<sessionMainKey>`.
 */
export interface SessionRef {
  /** The host's agent id (OpenClaw: `main` unless several agents are configured). */
  agentId?: string | undefined;
  /** The host's session key; OpenClaw's are already `agent:<agentId>:<mainKey>`. */
  sessionKey?: string | undefined;
  /** The agent's workspace directory, when the host has one (downloads go there). */
  workspaceDir?: string | undefined;
}

const DEFAULT_AGENT_ID = 'main';
const DEFAULT_MAIN_KEY = 'main';
/** Header-safe and bounded: anything else is not sent rather than sent mangled. */
const SAFE = /^[\x21-\x7e]{1,200}$/;

/** The `x-vlt-session-key` value for `session`, or undefined when it cannot be expressed safely. */
export function sessionKeyHeader(session: SessionRef): string | undefined {
  const agentId = session.agentId || DEFAULT_AGENT_ID;
  let mainKey = session.sessionKey || DEFAULT_MAIN_KEY;
  const own = `agent:${agentId}:`;
  if (mainKey.startsWith(own)) mainKey = mainKey.slice(own.length);
  // Another agent's key: that agent's id is the one that counts.
  else if (mainKey.startsWith('agent:')) return SAFE.test(mainKey) ? mainKey : undefined;
  const value = `${own}${mainKey}`;
  return SAFE.test(value) ? value : undefined;
}

/** The bucket an approval's follow-up is queued under until that session's next user turn. */
export function sessionBucket(session: SessionRef): string {
  return sessionKeyHeader(session) ?? `agent:${session.agentId || DEFAULT_AGENT_ID}:${DEFAULT_MAIN_KEY}`;
}
