// The line under the composer: how full the conversation's context is, and how many of its
// KV pages it shares with other contexts (its branches, the messages it was forked from)
// against those that are its own.

import * as contexts from "./contexts.js";

/** A sentence about context `id`, or "" when the server no longer holds it. */
export async function contextStats(id) {
  let held;
  try {
    held = await contexts.describe(id);
  } catch {
    return "";
  }
  const fill = Math.round((100 * held.n_tokens) / held.n_ctx);
  const { shared, own } = held.pages;
  return `context ${held.n_tokens} / ${held.n_ctx} tokens (${fill}%) · pages: ${shared} shared, ${own} own`;
}
