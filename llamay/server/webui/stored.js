// The contexts the server keeps in its state directory (`llamay serve --state-dir`), listed
// to be reopened. Without a state directory the list is not shown: the server then holds
// only the page's own contexts, which live as long as the conversation.

import * as contexts from "./contexts.js";

/** Whether the server keeps contexts in a state directory. */
export async function hasStateDir() {
  const stats = await contexts.stats();
  return Boolean(stats.replica && stats.replica.state_dir);
}

/** Fills `list` with the stored contexts, each with a button that calls `open(id)`. */
export async function showStored(list, open) {
  const found = await contexts.list();
  if (!found.length) {
    const none = document.createElement("li");
    none.textContent = "none";
    list.replaceChildren(none);
    return;
  }
  list.replaceChildren(
    ...found.map(({ id, model, n_tokens: tokens }) => {
      const item = document.createElement("li");
      const name = document.createElement("code");
      name.textContent = id;
      const about = document.createElement("span");
      about.textContent = ` ${model} · ${tokens ?? "?"} tokens `;
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Open";
      button.setAttribute("aria-label", `Open ${id}`);
      button.addEventListener("click", () => open(id));
      item.append(name, about, button);
      return item;
    }),
  );
}
