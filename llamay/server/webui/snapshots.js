// Snapshot files: a conversation's context downloaded with its KV state (the server's
// snapshot file), to be opened again here or by any llamay serving the same model file.

import * as contexts from "./contexts.js";

/** Saves context `id`'s snapshot as a file named after `model`. */
export async function download(id, model) {
  const blob = await contexts.snapshot(id);
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `${model.replace(/[^\w.-]+/g, "_")}-${id}.llamay`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}
