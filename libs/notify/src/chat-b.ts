/**
 * The team-chat provider (`chatbot_b`, Slack-style Web API): block-kit messages with URL
 * buttons, updated in place after the decision. The OAuth token goes in `Authorization`.
 */
import { z } from 'zod';
import { DeliveryError, postJson, providerError, type Transport } from './http.js';
import type { UrlButton } from './chat-a.js';

export interface ChatBContext {
  apiUrl: string;
  token: string;
  timeoutMs?: number;
  transport?: Transport | undefined;
}

const Answer = z.object({
  ok: z.boolean(),
  error: z.unknown().optional(),
  ts: z.string().optional(),
  channel: z.string().optional(),
});

async function call(ctx: ChatBContext, method: string, body: unknown) {
  const { status, json } = await postJson(`${ctx.apiUrl}/api/${method}`, body, {
    provider: 'team chat',
    headers: { authorization: `Bearer ${ctx.token}` },
    ...(ctx.timeoutMs !== undefined && { timeoutMs: ctx.timeoutMs }),
    transport: ctx.transport,
  });
  const parsed = Answer.safeParse(json);
  if (!parsed.success)
    throw new DeliveryError(`team chat ${method}: unexpected answer (${status})`, false, status);
  if (!parsed.data.ok) {
    const error = providerError(parsed.data.error, ctx.token);
    // The provider's own rate limit answer is an outage, not a refusal.
    throw new DeliveryError(`team chat ${method}: ${error} (${status})`, error === 'ratelimited', status);
  }
  return parsed.data;
}

export function blocks(text: string, buttons: UrlButton[] = [], link?: UrlButton): unknown[] {
  const out: unknown[] = [{ type: 'section', text: { type: 'mrkdwn', text } }];
  const all = [...buttons, ...(link ? [link] : [])];
  if (all.length) {
    out.push({
      type: 'actions',
      elements: all.map((b, i) => ({
        type: 'button',
        text: { type: 'plain_text', text: b.text },
        url: b.url,
        action_id: `vlt_${i}`,
        ...(b.text === 'Approve' && { style: 'primary' }),
        ...(b.text === 'Deny' && { style: 'danger' }),
      })),
    });
  }
  return out;
}

export async function postMessage(
  ctx: ChatBContext,
  msg: { channel: string; text: string; buttons?: UrlButton[]; link?: UrlButton },
): Promise<{ channel: string; ts: string }> {
  const answer = await call(ctx, 'chat.postMessage', {
    channel: msg.channel,
    text: msg.text,
    blocks: blocks(msg.text, msg.buttons, msg.link),
    unfurl_links: false,
  });
  if (!answer.ts) throw new DeliveryError('team chat chat.postMessage: no ts', false);
  return { channel: answer.channel ?? msg.channel, ts: answer.ts };
}

export async function updateMessage(
  ctx: ChatBContext,
  msg: { channel: string; ts: string; text: string },
): Promise<void> {
  await call(ctx, 'chat.update', {
    channel: msg.channel,
    ts: msg.ts,
    text: msg.text,
    blocks: blocks(msg.text),
  });
}
