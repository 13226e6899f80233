// The conversation on the page: a list item per message shown, its text and its controls,
// built again from the tree whenever the conversation changes. While an answer streams only
// that answer's text is redrawn, once per frame.
//
// The element with data-testid="message" holds the message's text and nothing else (its
// controls are beside it), so that what a reader or a test reads from it is the message.

import { renderMarkdown } from "./markdown.js";
import { splitReasoning } from "./reasoning.js";

export class View {
  /** `list`: the <ol>; `act(action, node, button)` runs a control's action. */
  constructor(list, act) {
    this.list = list;
    this.chat = null;
    this.pending = new Set();
    list.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-action]");
      const item = event.target.closest("li[data-node]");
      if (!button || !item || button.disabled || !this.chat) {
        return;
      }
      const node = this.chat.tree.find(item.dataset.node);
      if (node) {
        act(button.dataset.action, node, button);
      }
    });
  }

  /** Draws the conversation shown by `chat` again, keeping the focus where it was. */
  render(chat) {
    this.chat = chat;
    const focused = document.activeElement?.closest?.("li[data-node] button[data-action]");
    const keep = focused && {
      node: focused.closest("li").dataset.node,
      action: focused.dataset.action,
    };
    const nearBottom = isNearBottom();
    this.list.replaceChildren(...chat.tree.path().map((node) => this.item(node)));
    if (keep) {
      this.list
        .querySelector(`li[data-node="${keep.node}"] button[data-action="${keep.action}"]`)
        ?.focus();
    }
    if (nearBottom) {
      scrollToBottom();
    }
  }

  /** Redraws `node`'s text at the next frame (an answer streaming). */
  grow(node) {
    if (!this.pending.size) {
      requestAnimationFrame(() => this.flush());
    }
    this.pending.add(node);
  }

  flush() {
    const nearBottom = isNearBottom();
    for (const node of this.pending) {
      const item = this.list.querySelector(`li[data-node="${node.id}"]`);
      if (item) {
        item.querySelector('[data-testid="message"]').replaceChildren(...this.content(node));
        item.querySelector(".meta").textContent = meta(node);
      }
    }
    this.pending.clear();
    if (nearBottom) {
      scrollToBottom();
    }
  }

  item(node) {
    const chat = this.chat;
    const mine = node.role === "user";
    const item = document.createElement("li");
    item.className = `turn turn-${node.role}`;
    item.dataset.node = node.id;
    const who = document.createElement("p");
    who.className = "who";
    who.textContent = mine ? "You" : chat.model;
    if (chat.mode === "complete") {
      who.textContent = mine ? "Text" : `Continued by ${chat.model}`;
    }
    const message = document.createElement("div");
    message.className = "message";
    message.dataset.testid = "message";
    message.dataset.role = mine ? "user" : "assistant";
    message.append(...this.content(node));
    if (node.finish === null && chat.running?.node === node) {
      message.setAttribute("aria-busy", "true");
    }
    item.append(who, message, this.controls(node));
    return item;
  }

  content(node) {
    if (node.role === "user" || this.chat.mode === "complete") {
      const text = document.createElement("p");
      text.className = "plain";
      text.textContent = node.text;
      return [text];
    }
    const parts = [];
    const { reasoning, answer, thinking } = splitReasoning(node.text);
    if (reasoning || thinking) {
      const details = document.createElement("details");
      details.className = "reasoning";
      const summary = document.createElement("summary");
      summary.textContent = thinking ? "Thinking…" : "Reasoning";
      const body = document.createElement("p");
      body.className = "plain";
      body.textContent = reasoning;
      details.append(summary, body);
      parts.push(details);
    }
    parts.push(renderMarkdown(answer));
    return parts;
  }

  controls(node) {
    const busy = this.chat.busy;
    const bar = document.createElement("div");
    bar.className = "controls";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", "Message actions");
    const { index, count } = this.chat.tree.position(node);
    if (count > 1) {
      const branches = document.createElement("span");
      branches.className = "branches";
      branches.setAttribute("role", "group");
      branches.setAttribute("aria-label", `version ${index} of ${count}`);
      const label = document.createElement("span");
      label.className = "branch-label";
      label.dataset.testid = "branch-label";
      label.textContent = `${index}/${count}`;
      branches.append(
        button("‹", "branch-prev", "Previous version", busy || index === 1),
        label,
        button("›", "branch-next", "Next version", busy || index === count),
      );
      bar.append(branches);
    }
    if (node.role === "user") {
      bar.append(button("Edit", "edit", "Edit this message (a new branch)", busy));
    } else {
      bar.append(button("Regenerate", "regenerate", "Another answer (a new branch)", busy));
    }
    // an answer made here knows its seed and settings: it can be replayed
    const replayable = node.role === "assistant" && node.settings;
    if (replayable) {
      bar.append(button("Replay", "replay", "Generate this answer again and compare", busy));
    }
    const info = document.createElement("span");
    info.className = "meta";
    info.textContent = meta(node);
    bar.append(info);
    if (replayable) {
      const result = document.createElement("output");
      result.className = "replay-result";
      result.dataset.testid = "replay-result";
      result.textContent = node.replay || "";
      bar.append(result);
    }
    return bar;
  }
}

function button(text, action, label, disabled) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  element.dataset.action = action;
  element.dataset.testid = action;
  element.setAttribute("aria-label", label);
  element.title = label;
  element.disabled = disabled;
  return element;
}

function meta(node) {
  if (node.role !== "assistant" || !node.settings) {
    return "";
  }
  const parts = [`${node.tokens.length} tokens`];
  if (node.speed) {
    parts.push(`${node.speed.toFixed(1)} tokens/s`);
  }
  parts.push(`seed ${node.settings.seed}`);
  if (node.finish === "cancelled") {
    parts.push("stopped");
  } else if (node.finish === "length") {
    parts.push("max tokens reached");
  }
  return parts.join(" · ");
}

function isNearBottom() {
  const page = document.scrollingElement;
  return page.scrollHeight - page.scrollTop - page.clientHeight < 120;
}

function scrollToBottom() {
  const page = document.scrollingElement;
  page.scrollTop = page.scrollHeight;
}
