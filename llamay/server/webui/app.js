// The chat page: wires the page's controls to the conversation (chat.js) and its view
// (view.js), and runs the panels: the API key, the settings, the stored contexts.

import { onUnauthorized } from "./api.js";
import { Chat } from "./chat.js";
import { apiKey, setApiKey } from "./key.js";
import { fillPicker, listModels } from "./models.js";
import { keepSettings, readSettings } from "./settings.js";
import { download } from "./snapshots.js";
import { contextStats } from "./stats.js";
import { hasStateDir, showStored } from "./stored.js";
import { View } from "./view.js";

const MODEL_SLOT = "llamay.model";
const KEY_PAUSE_MS = 300;

const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"),
  mode: $("mode"),
  newChat: $("new-chat"),
  settingsToggle: $("settings-toggle"),
  settingsPanel: $("settings-panel"),
  settingsForm: $("settings-form"),
  download: $("snapshot-download"),
  open: $("snapshot-open"),
  keyPanel: $("key-panel"),
  keyForm: $("key-form"),
  key: $("api-key"),
  keyState: $("key-state"),
  storedPanel: $("stored-panel"),
  storedList: $("stored-list"),
  storedRefresh: $("stored-refresh"),
  alert: $("alert"),
  alertText: $("alert-text"),
  alertClose: $("alert-close"),
  conversation: $("conversation"),
  empty: $("empty"),
  editing: $("editing"),
  editCancel: $("edit-cancel"),
  composer: $("composer"),
  input: $("message-input"),
  send: $("send"),
  stop: $("stop"),
  status: $("status"),
  stats: $("stats"),
};

let editing = null; // the user message being edited, if any
let statsFor = null; // the context the stats line describes

const chat = new Chat({
  changed: () => refresh(),
  grew: (node) => {
    view.grow(node);
    if (node.speed) {
      // beside the status, not in it: a screen reader is not told every token
      ui.stats.textContent = `${node.speed.toFixed(1)} tokens/s`;
    }
  },
});
const view = new View(ui.conversation, act);

// --- the conversation -------------------------------------------------------------------------

function refresh() {
  view.render(chat);
  const busy = chat.busy;
  ui.send.disabled = busy;
  ui.stop.disabled = !chat.running;
  ui.download.disabled = busy || chat.tree.isEmpty();
  ui.open.disabled = busy;
  ui.newChat.disabled = busy;
  ui.empty.hidden = !chat.tree.isEmpty();
  if (!busy) {
    showStats();
  }
}

async function showStats() {
  const leaf = chat.tree.leaf();
  const id = leaf.contextId || null;
  statsFor = id;
  const text = id ? await contextStats(id) : "";
  if (statsFor === id) {
    ui.stats.textContent = text;
  }
}

/** Runs `task` as the page's one operation at a time, showing what fails. */
async function run(task, doing) {
  hideAlert();
  chat.working = true;
  ui.status.textContent = doing;
  refresh();
  try {
    await task();
    ui.status.textContent = "Ready";
  } catch (error) {
    showAlert(error.message);
    ui.status.textContent = "Ready";
  } finally {
    chat.working = false;
    refresh();
  }
}

function sampling() {
  return readSettings(ui.settingsForm).sampling;
}

function startIfEmpty() {
  if (chat.tree.isEmpty()) {
    chat.reset(ui.model.value, ui.mode.value, readSettings(ui.settingsForm).system);
  }
}

/** The model chosen, listing the models first if that has not happened yet (the page was used
 * before the list came, or before the API key was given). */
async function chosenModel() {
  if (!ui.model.value) {
    await loadModels();
  }
  if (!ui.model.value) {
    throw new Error("no model to use: the server lists none, or it needs the API key");
  }
  return ui.model.value;
}

function submit() {
  if (chat.busy) {
    return;
  }
  const text = ui.input.value;
  if (!text.trim() && !(chat.mode === "complete" && !chat.tree.isEmpty())) {
    ui.input.focus();
    return;
  }
  const target = editing;
  cancelEdit();
  ui.input.value = "";
  run(async () => {
    try {
      await chosenModel();
      startIfEmpty();
      await (target ? chat.edit(target, text, sampling()) : chat.send(text, sampling()));
    } catch (error) {
      if (!ui.input.value) {
        ui.input.value = text; // not lost: the user may send it again
      }
      throw error;
    }
  }, "Generating…");
  ui.input.focus();
}

/** A message's control (view.js). */
function act(action, node) {
  if (action === "edit") {
    editing = node;
    ui.input.value = node.text;
    ui.editing.hidden = false;
    ui.input.focus();
  } else if (action === "regenerate") {
    run(() => chat.regenerate(node, sampling()), "Generating…");
  } else if (action === "replay") {
    run(() => chat.replay(node), "Replaying…");
  } else if (action === "branch-prev" || action === "branch-next") {
    chat.switchBranch(node, action === "branch-prev" ? -1 : 1);
  }
}

function cancelEdit() {
  editing = null;
  ui.editing.hidden = true;
}

function newConversation() {
  cancelEdit();
  chat.reset(ui.model.value, ui.mode.value, readSettings(ui.settingsForm).system);
  ui.input.focus();
}

// --- models and the API key ---------------------------------------------------------------

async function loadModels() {
  try {
    const models = await listModels();
    fillPicker(ui.model, models, localStorage.getItem(MODEL_SLOT));
    if (!chat.model) {
      chat.model = ui.model.value;
    }
    if (apiKey()) {
      ui.keyState.textContent = "Key accepted.";
      ui.keyPanel.hidden = true;
    }
    ui.status.textContent = models.length ? "Ready" : "This server has no model";
    await loadStored();
  } catch (error) {
    if (error.status !== 401) {
      showAlert(`Could not list the models: ${error.message}`);
    }
    ui.status.textContent = "Not connected";
  }
}

async function loadStored() {
  if (await hasStateDir().catch(() => false)) {
    ui.storedPanel.hidden = false;
    await showStored(ui.storedList, reopen);
  }
}

function reopen(id) {
  run(async () => {
    await chat.reopen(id);
    syncPickers();
  }, "Opening…");
}

function syncPickers() {
  if ([...ui.model.options].some((option) => option.value === chat.model)) {
    ui.model.value = chat.model;
  }
  ui.mode.value = chat.mode;
}

onUnauthorized(() => {
  ui.keyPanel.hidden = false;
  ui.keyState.textContent = apiKey() ? "The server refused this key." : "";
  ui.status.textContent = "An API key is needed";
});

let keyTimer = 0;
ui.key.value = apiKey();
ui.key.addEventListener("input", () => {
  setApiKey(ui.key.value.trim());
  clearTimeout(keyTimer);
  keyTimer = setTimeout(loadModels, KEY_PAUSE_MS);
});
ui.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  clearTimeout(keyTimer);
  setApiKey(ui.key.value.trim());
  loadModels();
});

// --- alerts -------------------------------------------------------------------------------

function showAlert(text) {
  ui.alertText.textContent = text;
  ui.alert.hidden = false;
}

function hideAlert() {
  ui.alert.hidden = true;
}

// --- controls -----------------------------------------------------------------------------

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") {
    return;
  }
  if (chat.running) {
    chat.stop();
  } else if (editing) {
    cancelEdit();
    ui.input.value = "";
  }
});
ui.stop.addEventListener("click", () => chat.stop());
ui.editCancel.addEventListener("click", () => {
  cancelEdit();
  ui.input.value = "";
  ui.input.focus();
});
ui.newChat.addEventListener("click", newConversation);
ui.model.addEventListener("change", () => {
  localStorage.setItem(MODEL_SLOT, ui.model.value);
  newConversation();
});
ui.mode.addEventListener("change", newConversation);
ui.settingsToggle.addEventListener("click", () => {
  const open = ui.settingsPanel.hidden;
  ui.settingsPanel.hidden = !open;
  ui.settingsToggle.setAttribute("aria-expanded", String(open));
});
ui.download.addEventListener("click", () =>
  run(async () => download(await chat.leafContext(), chat.model), "Downloading the snapshot…"),
);
ui.open.addEventListener("change", () => {
  const file = ui.open.files[0];
  if (!file) {
    return;
  }
  cancelEdit();
  run(async () => {
    try {
      chat.model = await chosenModel();
      await chat.open(file);
      syncPickers();
    } finally {
      ui.open.value = ""; // the same file may be opened again
    }
  }, "Opening the snapshot…");
});
ui.storedRefresh.addEventListener("click", () => run(loadStored, "Listing…"));
ui.alertClose.addEventListener("click", hideAlert);

keepSettings(ui.settingsForm);
refresh();
loadModels();
