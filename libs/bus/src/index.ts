export {
  BusClosedError,
  BusDisconnectedError,
  BusConflictError,
  BusError,
  BusNoRespondersError,
  BusPublishError,
  BusReplyError,
  BusTimeoutError,
} from './bus.js';
export type {
  Bus,
  BusLogger,
  Consumer,
  ConsumerOptions,
  HandlerOutcome,
  Headers,
  KvBucket,
  KvEntry,
  KvWatch,
  ReplyHandle,
  RequestOptions,
  StreamMessage,
} from './bus.js';
export { busNames, type BusNames } from './names.js';
/** Trace context in message headers, for messages that wait somewhere first (the outbox). */
export { runInTraceContext, withTraceContext } from './wire.js';
export { createNatsBus, destroyNatsBusState, purgeNatsPrefix, type NatsBusOptions } from './nats-bus.js';
export { createInProcessBus, type InProcessBusOptions } from './in-process-bus.js';
export { createBus, type CreateBusOptions } from './create-bus.js';
/** Spans for work done once for many consumed messages (a batch insert). */
export { batchItemContext, inBatchItem, inBatchSpan, type BatchItemContext } from './spans.js';
