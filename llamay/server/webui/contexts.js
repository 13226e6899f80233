// llamay's own context API (/llamay/v1): one function per call the page makes.

import { call, callJson } from "./api.js";
import { events } from "./sse.js";

const BASE = "/llamay/v1/contexts";

function at(id, rest = "") {
  return `${BASE}/${encodeURIComponent(id)}${rest}`;
}

/** A new context of `model` from `start`: {messages} (a chat) or {prompt} (text). */
export function create(model, start) {
  return callJson(BASE, { method: "POST", json: { model, ...start } });
}

/** A copy-on-write fork of context `id`: {id, model, n_tokens}. */
export function fork(id) {
  return callJson(at(id, "/fork"), { method: "POST" });
}

/** {id, model, n_tokens, n_ctx, pages: {total, shared, own}, messages, text}. */
export function describe(id) {
  return callJson(at(id));
}

export function remove(id) {
  return call(at(id), { method: "DELETE" });
}

/** Every context the server holds (with --state-dir, those stored there too). */
export async function list() {
  return (await callJson(BASE)).contexts;
}

/** Ends the generation running in context `id`; its stream then ends as usual. */
export function cancel(id) {
  return callJson(at(id, "/cancel"), { method: "POST" });
}

/** Adds {messages} (turns, through the chat template) or {prompt} (text) to a context
 * without generating. */
export function append(id, addition) {
  return callJson(at(id, "/generate"), { method: "POST", json: { ...addition, max_tokens: 0 } });
}

/** A whole generation: {text, tokens, finish_reason, n_tokens}. */
export function generate(id, settings) {
  return callJson(at(id, "/generate"), { method: "POST", json: settings });
}

/** A generation's events: {event: "token", data: {text, token}} ..., then "done" or "error". */
export async function* stream(id, settings, signal) {
  const response = await call(at(id, "/generate"), {
    method: "POST",
    json: { ...settings, stream: true },
    signal,
  });
  yield* events(response);
}

/** Context `id`'s snapshot file, as a Blob. */
export async function snapshot(id) {
  return (await call(at(id, "/snapshot"))).blob();
}

/** A context restored from a snapshot file (checked by the server as every upload is). */
export function restore(model, file) {
  return callJson(`${BASE}?model=${encodeURIComponent(model)}`, {
    method: "POST",
    body: file,
    headers: { "Content-Type": "application/octet-stream" },
  });
}

/** The server's KV accounting and replica facts (/llamay/v1/stats). */
export function stats() {
  return callJson("/llamay/v1/stats");
}
