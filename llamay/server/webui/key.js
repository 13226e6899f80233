// The API key, kept for this tab only (sessionStorage): the page asks for it when the server
// answers 401, and api.js sends it with every call as a Bearer token.

const SLOT = "llamay.apiKey";

export function apiKey() {
  return sessionStorage.getItem(SLOT) || "";
}

export function setApiKey(key) {
  if (key) {
    sessionStorage.setItem(SLOT, key);
  } else {
    sessionStorage.removeItem(SLOT);
  }
}
