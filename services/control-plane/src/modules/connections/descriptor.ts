import type { ConnectionDescriptor } from '@vlt/contracts';

/**
 * What data planes cache about a connection. `baseUrl` is the one origin its credentials may
 * be sent to: the issue tracker's site, or the API URL the connection was made against.
 */
export function connectionDescriptor(c: {
  id: string;
  workspaceId: string;
  provider: string;
  service: string;
  label: string;
  status: string;
  singleton: boolean;
  metadata: unknown;
}): ConnectionDescriptor {
  const meta = (c.metadata ?? {}) as { siteUrl?: unknown; apiUrl?: unknown };
  const baseUrl =
    typeof meta.siteUrl === 'string' ? meta.siteUrl : typeof meta.apiUrl === 'string' ? meta.apiUrl : null;
  return {
    v: 1,
    id: c.id,
    workspaceId: c.workspaceId,
    provider: c.provider,
    service: c.service,
    label: c.label,
    status: c.status as ConnectionDescriptor['status'],
    singleton: c.singleton,
    baseUrl,
  };
}
