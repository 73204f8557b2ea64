export { DeliveryError, defaultTransport, transportVia, type RequestClient, type Transport } from './http.js';
export * as chatA from './chat-a.js';
export * as chatB from './chat-b.js';
export type { UrlButton, DetectedChat } from './chat-a.js';
export { sendPush, PUSH_BATCH, type PushMessage } from './push.js';
