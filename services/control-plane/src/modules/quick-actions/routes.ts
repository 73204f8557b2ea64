/**
 * `GET /api/quick-action/<token>`: a confirmation page; `POST` of the same URL: the decision.
 * Pages are tiny, self-contained HTML: no script, no outside resource, never framed, never
 * cached, and the token (in the path) never leaves in a Referer.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { QuickActionParams } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { inspectQuickAction, runQuickAction, type QuickActionPage } from './service.js';

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const STATUS: Record<QuickActionPage['state'], number> = {
  ready: 200,
  done: 200,
  used: 409,
  already_decided: 409,
  expired: 410,
  invalid: 404,
};

function page(p: QuickActionPage): string {
  let title: string;
  let body: string;
  switch (p.state) {
    case 'ready': {
      const verb = p.action === 'approve' ? 'Approve' : 'Deny';
      title = `${verb} this request?`;
      body = `<p><b>${escape(p.agentName)}</b> wants to run <code>${escape(p.method.toUpperCase())} ${escape(
        p.url,
      )}</code> on <b>${escape(p.connectionLabel)}</b>.</p>
<p>This link works once and expires at ${escape(p.expiresAt.toISOString())}.</p>
<form method="post"><button type="submit">${verb}</button></form>`;
      break;
    }
    case 'done':
      title = p.action === 'approve' ? 'Approved' : 'Denied';
      body = `<p>The request was ${p.action === 'approve' ? 'approved' : 'denied'}. You can close this page.</p>`;
      break;
    case 'used':
      title = 'This link was already used';
      body = '<p>Each button works once. Open the approvals page to see the outcome.</p>';
      break;
    case 'already_decided':
      title = 'Already decided';
      body = `<p>This request is already ${escape(p.status)}.</p>`;
      break;
    case 'expired':
      title = 'This request has expired';
      body = '<p>Approvals expire after a few minutes; the agent has to ask again.</p>';
      break;
    case 'invalid':
      title = 'Link not valid';
      body = '<p>This link is not a valid approval link.</p>';
      break;
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escape(
    title,
  )}</title><style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1.5rem}</style></head><body><h1>${escape(
    title,
  )}</h1>${body}</body></html>`;
}

function send(reply: FastifyReply, p: QuickActionPage) {
  return reply
    .status(STATUS[p.state])
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
    .send(page(p));
}

export function quickActionRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const schema = { tags: ['notifications'], params: QuickActionParams, hide: true };
    // The token is the credential: these routes take no other authentication.
    r.get('/api/quick-action/:token', { config: { auth: 'none' }, schema }, async (req, reply) =>
      send(reply, await inspectQuickAction(deps, req.params.token)),
    );
    r.post('/api/quick-action/:token', { config: { auth: 'none' }, schema }, async (req, reply) =>
      send(reply, await runQuickAction(deps, req.params.token)),
    );
  };
}
