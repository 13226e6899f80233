// A conversation as a tree. Each message is a node; a node's children are the messages that
// may follow it (an answer and its regenerations, a message and its edits), and one of them
// is active. The conversation shown is the path of active children from the root.

let made = 0;

export class Tree {
  constructor() {
    this.root = { id: "root", role: "root", parent: null, children: [], active: 0 };
  }

  /** A new child of `parent` with `fields`, made its active one. */
  add(parent, fields) {
    made += 1;
    const node = { id: `m${made}`, parent, children: [], active: 0, ...fields };
    parent.children.push(node);
    parent.active = parent.children.length - 1;
    return node;
  }

  /** The conversation shown: the active child of the root, its active child, and so on. */
  path() {
    const shown = [];
    for (let node = this.root; node.children.length; ) {
      node = node.children[node.active];
      shown.push(node);
    }
    return shown;
  }

  /** The last message shown, or the root when there is none. */
  leaf() {
    const shown = this.path();
    return shown.length ? shown[shown.length - 1] : this.root;
  }

  /** The messages from the first to `node`. */
  lineage(node) {
    const line = [];
    for (let at = node; at && at !== this.root; at = at.parent) {
      line.unshift(at);
    }
    return line;
  }

  /** Where `node` stands among its alternatives: {index (from 1), count}. */
  position(node) {
    return { index: node.parent.children.indexOf(node) + 1, count: node.parent.children.length };
  }

  /** Shows the alternative `delta` places from `node` (-1: the one before); false at an end. */
  step(node, delta) {
    const parent = node.parent;
    const index = parent.children.indexOf(node) + delta;
    if (index < 0 || index >= parent.children.length) {
      return false;
    }
    parent.active = index;
    return true;
  }

  /** Every message, on every branch. */
  all() {
    const found = [];
    const walk = (node) => {
      for (const child of node.children) {
        found.push(child);
        walk(child);
      }
    };
    walk(this.root);
    return found;
  }

  find(id) {
    return this.all().find((node) => node.id === id) || null;
  }

  isEmpty() {
    return this.root.children.length === 0;
  }
}
