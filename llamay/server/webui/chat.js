// A conversation on the server's contexts. Each message of the tree (tree.js) keeps the id of a
// context holding the conversation up to and including it, and nothing is written into that
// context again: what follows goes into a fork of it (copy-on-write: the shared part's pages
// are shared, nothing is computed again). So an answer is generated in a fork of its user
// message's context; regenerating forks that context again; editing a message forks the
// context of the message before it; switching branches makes no request at all.
//
// A context the server has let go (--context-ttl) is made again from the conversation's text.

import * as contexts from "./contexts.js";
import { compare } from "./replay.js";
import { Tree } from "./tree.js";

const MAX_SEED = 2 ** 31 - 1;

export class Chat {
  /** `changed()` after each change of the conversation, `grew(node)` after each token. */
  constructor({ changed, grew }) {
    this.changed = changed;
    this.grew = grew;
    this.tree = new Tree();
    this.model = "";
    this.mode = "chat";
    this.system = "";
    this.running = null; // the answer streaming: {node, abort}
    this.working = false; // an operation under way (app.js runs one at a time)
  }

  get busy() {
    return this.working || this.running !== null;
  }

  /** A new, empty conversation of `model` in `mode` ("chat" or "complete"); the contexts of
   * the one before are deleted (not those it borrowed: a stored context it reopened). */
  reset(model, mode, system) {
    for (const node of this.tree.all()) {
      if (node.contextId && !node.borrowed) {
        contexts.remove(node.contextId).catch(() => {});
      }
    }
    this.tree = new Tree();
    this.model = model;
    this.mode = mode;
    this.system = system;
    this.changed();
  }

  /** A new message after the last one shown, and its answer. In text completion an empty
   * message asks for more of the text. */
  async send(text, settings) {
    const leaf = this.tree.leaf();
    if (this.mode === "complete" && !text && leaf !== this.tree.root) {
      return this.answer(leaf, settings);
    }
    const node = await this.addMessage(leaf, text);
    return this.answer(node, settings);
  }

  /** `node` (a user message) written again as `text`: a new branch beside it, answered. */
  async edit(node, text, settings) {
    const edited = await this.addMessage(node.parent, text);
    return this.answer(edited, settings);
  }

  /** Another answer in place of `node`'s: a new branch beside it. */
  regenerate(node, settings) {
    return this.answer(node.parent, settings);
  }

  /** Generates `node`'s answer again with its seed and settings, and says whether it came out
   * the same. */
  async replay(node) {
    node.replay = "replaying…";
    this.changed();
    let forked = null;
    try {
      forked = await this.forkOf(node.parent);
      // a stopped answer is replayed to the token it stopped at
      const maxTokens = node.finish === "cancelled" ? node.tokens.length : node.settings.max_tokens;
      const again = await contexts.generate(forked.id, { ...node.settings, max_tokens: maxTokens });
      node.replay = compare(node, again);
    } catch (error) {
      node.replay = `replay failed: ${error.message}`;
      throw error;
    } finally {
      if (forked) {
        contexts.remove(forked.id).catch(() => {});
      }
      this.changed();
    }
  }

  /** Ends the answer being generated (the server ends it; the stream then closes as usual). */
  async stop() {
    const running = this.running;
    if (!running) {
      return;
    }
    try {
      const answer = await contexts.cancel(running.node.contextId);
      if (!answer.cancelled && this.running === running) {
        // the request has not reached the server's generation yet: ask again in a moment
        setTimeout(() => this.stop(), 200);
      }
    } catch {
      running.abort.abort(); // the server notices the closed stream
    }
  }

  /** Shows `step` (-1, +1) places from `node` among its alternatives. */
  switchBranch(node, step) {
    if (this.tree.step(node, step)) {
      this.changed();
    }
  }

  /** A conversation from a snapshot file, restored on the server and continued from there. */
  async open(file) {
    const restored = await contexts.restore(this.model, file);
    await this.load(restored.id, false);
  }

  /** The conversation a context holds (a stored one, from --state-dir); it is only forked. */
  async reopen(id) {
    await this.load(id, true);
  }

  async load(id, borrowed) {
    const held = await contexts.describe(id);
    const messages = held.messages;
    this.reset(held.model, messages ? "chat" : "complete", "");
    let parent = this.tree.root;
    const turns = messages ? messages.filter((turn) => turn.role !== "system") : [];
    this.system = messages ? messages.filter((turn) => turn.role === "system").map((t) => t.content).join("\n\n") : "";
    if (!messages) {
      turns.push({ role: "user", content: held.text || "" });
    } else if (turns.length && turns[turns.length - 1].content === "") {
      turns.pop(); // the answer not begun: the context ends after the user's turn
    }
    for (const turn of turns) {
      parent = this.tree.add(parent, { role: turn.role, text: turn.content, tokens: [], settings: null });
    }
    if (parent !== this.tree.root) {
      parent.contextId = held.id;
      parent.borrowed = borrowed;
    }
    this.changed();
  }

  /** The id of a context holding the conversation shown (made again if the server let it go). */
  async leafContext() {
    const leaf = this.tree.leaf();
    if (leaf.contextId) {
      try {
        await contexts.describe(leaf.contextId);
        return leaf.contextId;
      } catch (error) {
        if (error.status !== 404) {
          throw error;
        }
      }
    }
    return this.remade(leaf);
  }

  // --- steps ------------------------------------------------------------------------------

  /** A user message after `parent`, in a context of its own (ready for the answer). */
  async addMessage(parent, text) {
    if (!text && (this.mode === "chat" || parent === this.tree.root)) {
      throw new Error("write a message first");
    }
    let context;
    if (parent === this.tree.root) {
      context = await contexts.create(this.model, this.start([{ role: "user", text }]));
    } else {
      context = await this.forkOf(parent);
      await contexts.append(context.id, this.addition(text));
    }
    const node = this.tree.add(parent, { role: "user", text, contextId: context.id });
    this.changed();
    return node;
  }

  /** A new answer to `parent` (a user message, or in text completion any message), streamed. */
  async answer(parent, settings) {
    const used = { ...settings, seed: settings.seed ?? Math.floor(Math.random() * MAX_SEED) };
    const forked = await this.forkOf(parent);
    const node = this.tree.add(parent, {
      role: "assistant",
      text: "",
      tokens: [],
      contextId: forked.id,
      settings: used,
      finish: null,
      speed: null,
      replay: "",
    });
    this.running = { node, abort: new AbortController() };
    this.changed();
    let first = 0;
    try {
      for await (const { event, data } of contexts.stream(forked.id, used, this.running.abort.signal)) {
        if (event === "token") {
          node.text += data.text;
          if (data.token !== undefined) {
            node.tokens.push(data.token);
            const now = performance.now();
            first = first || now;
            if (node.tokens.length > 1) {
              node.speed = ((node.tokens.length - 1) * 1000) / (now - first);
            }
          }
          this.grew(node);
        } else if (event === "done") {
          node.finish = data.finish_reason;
        } else if (event === "error") {
          throw new Error(data.error.message);
        }
      }
    } catch (error) {
      if (error.name !== "AbortError") {
        throw error;
      }
      node.finish = "cancelled";
    } finally {
      this.running = null;
      this.changed();
    }
    return node;
  }

  /** A fork of `node`'s context, made again from the conversation when the server no longer
   * holds it. */
  async forkOf(node) {
    if (node.contextId) {
      try {
        return await contexts.fork(node.contextId);
      } catch (error) {
        if (error.status !== 404) {
          throw error;
        }
      }
    }
    return contexts.fork(await this.remade(node));
  }

  /** A new context for `node`, made from the conversation up to it; its id. */
  async remade(node) {
    const made = await contexts.create(this.model, this.start(this.tree.lineage(node)));
    node.contextId = made.id;
    node.borrowed = false;
    return made.id;
  }

  /** A create request's start for the conversation `messages` ({role, text}). */
  start(messages) {
    if (this.mode === "complete") {
      return { prompt: messages.map((message) => message.text).join("") };
    }
    const turns = messages.map((message) => ({ role: message.role, content: message.text }));
    return { messages: this.system ? [{ role: "system", content: this.system }, ...turns] : turns };
  }

  /** What a generate request adds for a new user message. */
  addition(text) {
    return this.mode === "complete" ? { prompt: text } : { messages: [{ role: "user", content: text }] };
  }
}
