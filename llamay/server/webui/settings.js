// The settings form: the system prompt and the sampling settings of the next answer, kept in
// localStorage so that a reload (or the next visit) keeps them.

const SLOT = "llamay.settings";
const FIELDS = ["system", "temperature", "top_p", "seed", "max_tokens"];

/** {system, sampling: {temperature, top_p, seed, max_tokens}} from `form`; a blank seed is
 * null (chat.js then draws one, and the answer keeps it). */
export function readSettings(form) {
  const number = (name, fallback) => {
    const value = form.elements[name].value.trim();
    return value === "" ? fallback : Number(value);
  };
  return {
    system: form.elements.system.value.trim(),
    sampling: {
      temperature: number("temperature", 0.8),
      top_p: number("top_p", 0.95),
      seed: number("seed", null),
      max_tokens: number("max_tokens", 512),
    },
  };
}

/** Fills `form` with the settings kept last time, and keeps them whenever they change. */
export function keepSettings(form) {
  let kept = {};
  try {
    kept = JSON.parse(localStorage.getItem(SLOT) || "{}") || {};
  } catch {
    kept = {}; // not ours, or damaged: the defaults
  }
  for (const name of FIELDS) {
    if (typeof kept[name] === "string") {
      form.elements[name].value = kept[name];
    }
  }
  form.addEventListener("input", () => {
    const values = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    localStorage.setItem(SLOT, JSON.stringify(values));
  });
}
