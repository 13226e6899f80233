// The models this server runs, for the model picker: names from /v1/models, and each one's
// family, size and quantization from /api/tags where the store knows them.

import { callJson } from "./api.js";

/** [{name, label}] in the server's order. */
export async function listModels() {
  const [listed, tags] = await Promise.all([
    callJson("/v1/models"),
    callJson("/api/tags").catch(() => ({ models: [] })),
  ]);
  const details = new Map(tags.models.map((model) => [model.name, model.details || {}]));
  return listed.data.map(({ id }) => {
    const known = details.get(id) || {};
    const facts = [known.family, known.parameter_size, known.quantization_level].filter(Boolean);
    return { name: id, label: facts.length ? `${id} — ${facts.join(" · ")}` : id };
  });
}

/** Fills `select` with `models`, keeping `chosen` selected when it is among them. */
export function fillPicker(select, models, chosen) {
  select.replaceChildren(
    ...models.map(({ name, label }) => {
      const option = document.createElement("option");
      option.value = name;
      option.textContent = label;
      return option;
    }),
  );
  if (models.some(({ name }) => name === chosen)) {
    select.value = chosen;
  }
}
