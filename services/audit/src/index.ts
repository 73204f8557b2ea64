export { auditHandler, startAuditWriter, storeAuditEvent } from './audit-writer.js';
export { buildAuditApp, type AuditDeps } from './app.js';
