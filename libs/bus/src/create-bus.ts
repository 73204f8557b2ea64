import type { Bus, BusLogger } from './bus.js';
import type { BusNames } from './names.js';
import { createInProcessBus } from './in-process-bus.js';
import { createNatsBus } from './nats-bus.js';

export interface CreateBusOptions {
  /** `NATS_URL`: one URL or a comma-separated list. Absent or empty: the in-process bus. */
  natsUrl?: string;
  names: BusNames;
  logger?: BusLogger;
  /** Connection name shown by the NATS server, e.g. the service name. */
  name?: string;
}

/** NATS when a URL is given, otherwise the in-process bus of the embedded default. */
export async function createBus(opts: CreateBusOptions): Promise<Bus> {
  const servers = (opts.natsUrl ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (servers.length > 0) {
    return createNatsBus({ servers, names: opts.names, logger: opts.logger, name: opts.name });
  }
  return createInProcessBus({ names: opts.names, logger: opts.logger });
}
