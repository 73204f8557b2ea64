/**
 * The bot-chat provider (`chatbot_a`, Telegram-style Bot API): the token is a path segment,
 * `/bot<token>/<method>`, so URLs built here never reach a log or an error.
 */
import { z } from 'zod';
import { DeliveryError, postJson, providerError, type Transport } from './http.js';

export interface ChatAContext {
  apiUrl: string;
  token: string;
  timeoutMs?: number;
  transport?: Transport | undefined;
}

export interface UrlButton {
  text: string;
  url: string;
}

const Envelope = z.object({
  ok: z.boolean(),
  result: z.unknown().optional(),
  description: z.unknown().optional(),
});

async function call(ctx: ChatAContext, method: string, body: unknown): Promise<unknown> {
  const { status, json } = await postJson(`${ctx.apiUrl}/bot${ctx.token}/${method}`, body, {
    provider: 'bot chat',
    ...(ctx.timeoutMs !== undefined && { timeoutMs: ctx.timeoutMs }),
    transport: ctx.transport,
  });
  const parsed = Envelope.safeParse(json);
  if (!parsed.success)
    throw new DeliveryError(`bot chat ${method}: unexpected answer (${status})`, false, status);
  if (!parsed.data.ok) {
    throw new DeliveryError(
      `bot chat ${method}: ${providerError(parsed.data.description, ctx.token)} (${status})`,
      false,
      status,
    );
  }
  return parsed.data.result;
}

export async function sendMessage(
  ctx: ChatAContext,
  msg: { chatId: string; text: string; buttons?: UrlButton[] },
): Promise<{ chatId: string; messageId: number }> {
  const result = await call(ctx, 'sendMessage', {
    chat_id: msg.chatId,
    text: msg.text,
    // Link previews would fetch the quick-action page; the page never acts on GET, but say no anyway.
    link_preview_options: { is_disabled: true },
    ...(msg.buttons?.length && {
      reply_markup: { inline_keyboard: [msg.buttons.map((b) => ({ text: b.text, url: b.url }))] },
    }),
  });
  const id = z.object({ message_id: z.number().int() }).safeParse(result);
  if (!id.success) throw new DeliveryError('bot chat sendMessage: no message id', false);
  return { chatId: msg.chatId, messageId: id.data.message_id };
}

/** Replaces a message's text and removes its buttons (the decision has been made). */
export async function editMessageText(
  ctx: ChatAContext,
  msg: { chatId: string; messageId: number; text: string },
): Promise<void> {
  await call(ctx, 'editMessageText', {
    chat_id: msg.chatId,
    message_id: msg.messageId,
    text: msg.text,
    reply_markup: { inline_keyboard: [] },
  });
}

const Chat = z.object({
  id: z.union([z.number(), z.string()]),
  type: z.string().max(40),
  title: z.string().max(300).optional(),
  first_name: z.string().max(300).optional(),
  last_name: z.string().max(300).optional(),
  username: z.string().max(300).optional(),
});
const Update = z.object({
  message: z.object({ chat: Chat }).optional(),
  edited_message: z.object({ chat: Chat }).optional(),
  channel_post: z.object({ chat: Chat }).optional(),
  my_chat_member: z.object({ chat: Chat }).optional(),
});

export interface DetectedChat {
  chatId: string;
  name: string;
  type: string;
  username: string | null;
}

/** Chats the bot has recently seen, once each, in the order first seen. */
export async function detectChats(ctx: ChatAContext): Promise<DetectedChat[]> {
  const result = await call(ctx, 'getUpdates', { limit: 100, timeout: 0 });
  const updates = Array.isArray(result) ? result.slice(0, 100) : [];
  const chats = new Map<string, DetectedChat>();
  for (const raw of updates) {
    const u = Update.safeParse(raw);
    if (!u.success) continue;
    for (const holder of [
      u.data.message,
      u.data.edited_message,
      u.data.channel_post,
      u.data.my_chat_member,
    ]) {
      const chat = holder?.chat;
      if (!chat) continue;
      const chatId = String(chat.id);
      if (chats.has(chatId)) continue;
      const person = [chat.first_name, chat.last_name].filter(Boolean).join(' ');
      chats.set(chatId, {
        chatId,
        name: chat.title ?? (person || chat.username || chatId),
        type: chat.type,
        username: chat.username ?? null,
      });
    }
  }
  return [...chats.values()];
}
