/**
 * A database belongs to one bus (ADR 0071). The outbox relay publishes every unpublished row of
 * its database onto its own bus prefix and stops at the first row that fails, so a second
 * deployment pointed at the same database with another prefix would publish the first one's
 * audit events and cache updates (revocations among them) where none of its data planes read,
 * and stall on the rest. The first control plane to start binds the database to its prefix;
 * one with another prefix refuses to start instead of corrupting both.
 */
import type { Sql } from '@vlt/db';

export class DatabaseBoundToOtherBusError extends Error {
  constructor(
    readonly boundPrefix: string,
    readonly prefix: string,
  ) {
    super(
      `this database is bound to bus prefix "${boundPrefix}", and this control plane uses ` +
        `"${prefix}" (VLT_NATS_PREFIX). Two deployments must not share a database: their outbox ` +
        `relays would publish each other's revocations onto the wrong bus. To move this deployment ` +
        `to the new prefix, stop every control plane and run UPDATE bus_binding SET prefix = ` +
        `'${prefix}' on this database.`,
    );
    this.name = 'DatabaseBoundToOtherBusError';
  }
}

/** Binds the database to `prefix` if it is bound to none; throws if it is bound to another. */
export async function bindDatabaseToBus(sql: Sql, prefix: string): Promise<void> {
  // One statement whatever the state: replicas starting together race on the primary key.
  const rows = await sql<{ prefix: string }>`
    INSERT INTO bus_binding (id, prefix) VALUES (1, ${prefix})
    ON CONFLICT (id) DO UPDATE SET id = bus_binding.id
    RETURNING prefix`;
  const bound = rows[0]?.prefix;
  if (bound === undefined) throw new Error('the bus binding could not be read');
  if (bound !== prefix) throw new DatabaseBoundToOtherBusError(bound, prefix);
}
