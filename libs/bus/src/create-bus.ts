import type { Bus, BusLogger } from './bus.js';
import type { BusNames } from './names.js';
import { createInProcessBus } from './in-process-bus.js';
import { createNatsBus } from './nats-bus.js';

export interface CreateBusOptions {
  /** The NATS servers (`NATS_URL`, split by the config). Empty: the in-process bus. */
  natsServers: readonly string[];
  names: BusNames;
  logger?: BusLogger;
  /** Connection name shown by the NATS server, e.g. the service name. */
  name?: string;
}

/** NATS when a URL is given, otherwise the in-process bus of the embedded default. */
export async function createBus(opts: CreateBusOptions): Promise<Bus> {
  if (opts.natsServers.length > 0) {
    return createNatsBus({
      servers: [...opts.natsServers],
      names: opts.names,
      logger: opts.logger,
      name: opts.name,
    });
  }
  return createInProcessBus({ names: opts.names, logger: opts.logger });
}
