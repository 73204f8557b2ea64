import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { AuditExportQuery, AuditListQuery, AuditListResponse } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import { CSV_COLUMNS, csvRow, exportAudit, listAudit } from './service.js';

export function auditRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.get(
      '/v1/audit',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['audit'], querystring: AuditListQuery, response: { 200: AuditListResponse } },
      },
      async (req) => listAudit(deps, requireUser(req), req.query),
    );

    r.get(
      '/v1/audit/export',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['audit'], querystring: AuditExportQuery },
      },
      async (req, reply) => {
        const caller = requireUser(req);
        const { format, ...filters } = req.query;
        const stamp = deps.now().toISOString().replace(/[:.]/g, '-');
        const events = exportAudit(deps, caller, filters);
        if (format === 'csv') {
          reply
            .header('content-type', 'text/csv; charset=utf-8')
            .header('content-disposition', `attachment; filename="audit-${stamp}.csv"`);
          return reply.send(
            Readable.from(
              (async function* () {
                yield CSV_COLUMNS.join(',') + '\r\n';
                for await (const e of events) yield csvRow(e);
              })(),
            ),
          );
        }
        reply
          .header('content-type', 'application/json; charset=utf-8')
          .header('content-disposition', `attachment; filename="audit-${stamp}.json"`);
        return reply.send(
          Readable.from(
            (async function* () {
              yield '{"events":[';
              let first = true;
              for await (const e of events) {
                yield (first ? '' : ',') + JSON.stringify(e);
                first = false;
              }
              yield ']}';
            })(),
          ),
        );
      },
    );
  };
}
