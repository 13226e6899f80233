// Calls to the server: the API key (when the user gave one) on every request, and a failed
// answer as an ApiError carrying the server's own message and status.

import { apiKey } from "./key.js";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const unauthorizedListeners = [];

/** Calls `listener(error)` whenever the server answers 401 (no key, or a wrong one). */
export function onUnauthorized(listener) {
  unauthorizedListeners.push(listener);
}

/** The response to `path`; `json` is sent as JSON, `body` as it is. */
export async function call(path, { method = "GET", json, body, headers = {}, signal } = {}) {
  const sent = { ...headers };
  const key = apiKey();
  if (key) {
    sent.Authorization = `Bearer ${key}`;
  }
  let payload = body;
  if (json !== undefined) {
    sent["Content-Type"] = "application/json";
    payload = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(path, { method, headers: sent, body: payload, signal, cache: "no-store" });
  } catch (error) {
    if (error.name === "AbortError") {
      throw error;
    }
    throw new ApiError(0, `the server did not answer (${error.message})`);
  }
  if (!response.ok) {
    const error = new ApiError(response.status, await messageOf(response));
    if (response.status === 401) {
      unauthorizedListeners.forEach((listener) => listener(error));
    }
    throw error;
  }
  return response;
}

/** The JSON answer to `path` (null for 204). */
export async function callJson(path, options) {
  const response = await call(path, options);
  return response.status === 204 ? null : response.json();
}

async function messageOf(response) {
  const text = await response.text();
  try {
    const error = JSON.parse(text).error;
    if (typeof error === "string") {
      return error;
    }
    if (error && typeof error.message === "string") {
      return error.message;
    }
  } catch {
    // not JSON: the status says it
  }
  return `${response.status} ${response.statusText}`.trim();
}
