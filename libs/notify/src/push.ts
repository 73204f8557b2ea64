/**
 * Mobile push (Expo-style push API at VLT_PUSH_API_URL): one JSON array of messages per call,
 * one ticket per message. A `DeviceNotRegistered` ticket means the token is gone for good.
 */
import { z } from 'zod';
import { DeliveryError, postJson, type Transport } from './http.js';

export interface PushMessage {
  to: string;
  title: string;
  body: string;
  data: { type: 'approval_request' | 'security_alert'; url: string };
}

const Ticket = z.object({
  status: z.string(),
  details: z.object({ error: z.string().optional() }).partial().optional(),
});
const Answer = z.object({ data: z.array(Ticket) });

/** The provider accepts at most 100 messages per request. */
export const PUSH_BATCH = 100;

/** Sends; returns the tokens the provider says are no longer registered. */
export async function sendPush(
  apiUrl: string,
  messages: PushMessage[],
  opts: { timeoutMs?: number; transport?: Transport | undefined } = {},
): Promise<{ unregistered: string[] }> {
  const unregistered: string[] = [];
  for (let i = 0; i < messages.length; i += PUSH_BATCH) {
    const batch = messages.slice(i, i + PUSH_BATCH);
    const { status, json } = await postJson(
      apiUrl,
      batch.map((m) => ({
        to: m.to,
        title: m.title,
        body: m.body,
        priority: 'high',
        channelId: 'approvals',
        sound: 'default',
        data: m.data,
      })),
      {
        provider: 'push',
        transport: opts.transport,
        ...(opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }),
      },
    );
    if (status >= 400) throw new DeliveryError(`push answered ${status}`, false, status);
    const parsed = Answer.safeParse(json);
    if (!parsed.success) throw new DeliveryError(`push: unexpected answer (${status})`, false, status);
    parsed.data.data.forEach((t, j) => {
      if (t.status === 'error' && t.details?.error === 'DeviceNotRegistered' && batch[j]) {
        unregistered.push(batch[j].to);
      }
    });
  }
  return { unregistered };
}
