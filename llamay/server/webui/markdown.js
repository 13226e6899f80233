// Markdown to DOM nodes, safe by construction: nothing here parses HTML. Every element is made
// with createElement from the short list below, text goes in as text nodes, and the one value
// taken from the input into an attribute, a link's address, is kept only when the browser's
// own URL parser reads it as http:, https: or mailto:. So `<img src=x onerror=...>` in a
// model's answer shows as those characters, a `javascript:` link as its plain text, and an
// image as a link to it (the page loads nothing from elsewhere).
//
// Blocks: paragraphs, headings, fenced code (highlighted, with a copy button), block quotes,
// lists (nested by indentation), tables, rules. Inline: code, emphasis, strong, strikethrough,
// links, autolinks, bare URLs, hard line breaks (a newline in a paragraph is a break, as chat
// answers are written).

import { highlight } from "./highlight.js";

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const ESCAPABLE = "\\`*_{}[]()#+-.!|~<>\"'";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_RULE = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

/** The rendering of `source` as a DocumentFragment. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  renderBlocks(source.replace(/\r\n?/g, "\n").split("\n"), fragment);
  return fragment;
}

/** A safe address for a link, or null: what the URL parser reads, if its protocol is allowed. */
export function safeUrl(address) {
  try {
    const url = new URL(address);
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null; // relative, or not a URL: the page has nothing to link it to
  }
}

// --- blocks ---------------------------------------------------------------------------------

function renderBlocks(lines, into) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
    } else if (FENCE.test(line)) {
      i = codeBlock(lines, i, into);
    } else if (HEADING.test(line)) {
      const [, marks, text = ""] = HEADING.exec(line);
      // an answer's "# Title" sits under the page's own headings
      into.append(inlineElement(`h${Math.min(marks.length + 2, 6)}`, text));
      i += 1;
    } else if (RULE.test(line)) {
      into.append(document.createElement("hr"));
      i += 1;
    } else if (QUOTE.test(line)) {
      i = quote(lines, i, into);
    } else if (ITEM.test(line) && ITEM.exec(line)[3] !== undefined) {
      i = list(lines, i, into);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      i = table(lines, i, into);
    } else {
      i = paragraph(lines, i, into);
    }
  }
}

function startsBlock(line) {
  const item = ITEM.exec(line);
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    RULE.test(line) ||
    QUOTE.test(line) ||
    (item !== null && item[3] !== undefined)
  );
}

function paragraph(lines, i, into) {
  const text = [];
  while (i < lines.length && lines[i].trim() && (!text.length || !startsBlock(lines[i]))) {
    text.push(lines[i].trim());
    i += 1;
  }
  into.append(inlineElement("p", text.join("\n")));
  return i;
}

function codeBlock(lines, i, into) {
  const [, fence, language] = FENCE.exec(lines[i]);
  const indent = lines[i].length - lines[i].trimStart().length;
  const body = [];
  i += 1;
  while (i < lines.length) {
    const closing = lines[i].trim();
    if (closing.startsWith(fence) && closing.replaceAll(fence[0], "") === "") {
      i += 1;
      break;
    }
    body.push(lines[i].slice(Math.min(indent, lines[i].length - lines[i].trimStart().length)));
    i += 1;
  }
  into.append(codeFigure(body.join("\n"), language.toLowerCase()));
  return i;
}

function codeFigure(code, language) {
  const figure = document.createElement("figure");
  figure.className = "code";
  const head = document.createElement("figcaption");
  const name = document.createElement("span");
  name.textContent = language || "code";
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy";
  copy.setAttribute("aria-label", "Copy code");
  copy.addEventListener("click", () => copyText(code, copy));
  head.append(name, copy);
  const pre = document.createElement("pre");
  const element = document.createElement("code");
  element.append(highlight(code, language));
  pre.append(element);
  figure.append(head, pre);
  return figure;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.dataset.state = "copied";
  } catch {
    button.dataset.state = "failed";
  }
  setTimeout(() => delete button.dataset.state, 1500);
}

function quote(lines, i, into) {
  const inner = [];
  while (i < lines.length && QUOTE.test(lines[i])) {
    inner.push(QUOTE.exec(lines[i])[1]);
    i += 1;
  }
  const element = document.createElement("blockquote");
  renderBlocks(inner, element);
  into.append(element);
  return i;
}

function list(lines, i, into) {
  const [, indent, marker] = ITEM.exec(lines[i]);
  const ordered = /\d/.test(marker);
  const element = document.createElement(ordered ? "ol" : "ul");
  if (ordered && parseInt(marker, 10) !== 1) {
    element.start = parseInt(marker, 10);
  }
  while (i < lines.length) {
    const item = ITEM.exec(lines[i]);
    if (!item || item[1].length !== indent.length || /\d/.test(item[2]) !== ordered) {
      break;
    }
    // the item's lines: its own, then those indented past its marker (and blank lines
    // between them), dedented
    const width = item[1].length + item[2].length + 1;
    const body = [item[3]];
    i += 1;
    while (i < lines.length) {
      const line = lines[i];
      const deeper = line.length - line.trimStart().length > indent.length;
      if (line.trim() && !deeper) {
        break;
      }
      if (!line.trim() && !(i + 1 < lines.length && indentOf(lines[i + 1]) > indent.length)) {
        break;
      }
      body.push(line.slice(Math.min(width, indentOf(line))));
      i += 1;
    }
    const li = document.createElement("li");
    if (body.length === 1) {
      appendInline(body[0], li);
    } else {
      renderBlocks(body, li);
    }
    element.append(li);
    while (i < lines.length && !lines[i].trim()) {
      i += 1; // blank lines between items keep one list
    }
  }
  into.append(element);
  return i;
}

function indentOf(line) {
  return line.length - line.trimStart().length;
}

function table(lines, i, into) {
  const cells = (line) =>
    line
      .trim()
      .replace(/^\|/, "")
      .replace(/(?<!\\)\|$/, "")
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim().replaceAll("\\|", "|"));
  const alignments = cells(lines[i + 1]).map((rule) =>
    rule.endsWith(":") ? (rule.startsWith(":") ? "center" : "right") : rule.startsWith(":") ? "left" : "",
  );
  const element = document.createElement("table");
  const head = document.createElement("thead");
  head.append(row(cells(lines[i]), "th", alignments));
  const body = document.createElement("tbody");
  i += 2;
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
    body.append(row(cells(lines[i]), "td", alignments));
    i += 1;
  }
  element.append(head, body);
  const scroller = document.createElement("div");
  scroller.className = "table";
  scroller.append(element);
  into.append(scroller);
  return i;
}

function row(values, tag, alignments) {
  const tr = document.createElement("tr");
  alignments.forEach((alignment, column) => {
    const cell = inlineElement(tag, values[column] || "");
    if (alignment) {
      cell.className = `align-${alignment}`;
    }
    tr.append(cell);
  });
  return tr;
}

// --- inline ---------------------------------------------------------------------------------

function inlineElement(tag, text) {
  const element = document.createElement(tag);
  appendInline(text, element);
  return element;
}

const BARE_URL = /https?:\/\/[^\s<>"]*[^\s<>".,:;!?'")\]]/y;
const AUTOLINK = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/y;
const DESTINATION = /\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\([^\s()]*\))*)(?:\s+("[^"]*"|'[^']*'))?\s*\)/y;

/** Appends `text`'s inline Markdown to `into`; inside a link's text (`links` false) a link
 * or URL is text: a link never holds another. */
function appendInline(text, into, links = true) {
  let plain = "";
  const flush = () => {
    if (plain) {
      into.append(plain); // a text node: never markup
      plain = "";
    }
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "\n") {
      flush();
      into.append(document.createElement("br"));
      i += 1;
      continue;
    }
    const span =
      codeSpan(text, i) ||
      (links && (link(text, i) || autolink(text, i) || bareUrl(text, i))) ||
      emphasis(text, i, links);
    if (span) {
      flush();
      into.append(span.node);
      i = span.end;
      continue;
    }
    plain += c;
    i += 1;
  }
  flush();
}

function codeSpan(text, i) {
  if (text[i] !== "`") {
    return null;
  }
  let ticks = 1;
  while (text[i + ticks] === "`") {
    ticks += 1;
  }
  const fence = "`".repeat(ticks);
  for (let end = text.indexOf(fence, i + ticks); end >= 0; end = text.indexOf(fence, end + 1)) {
    if (text[end + ticks] !== "`" && text[end - 1] !== "`") {
      const code = document.createElement("code");
      code.textContent = text.slice(i + ticks, end).replace(/^ (.*) $/s, "$1");
      return { node: code, end: end + ticks };
    }
  }
  // an unmatched run of backticks is text, all of it
  return { node: document.createTextNode(fence), end: i + ticks };
}

function link(text, i) {
  const image = text[i] === "!" && text[i + 1] === "[";
  if (!image && text[i] !== "[") {
    return null;
  }
  const open = i + (image ? 1 : 0);
  let depth = 0;
  let close = -1;
  for (let at = open; at < text.length; at += 1) {
    if (text[at] === "\\") {
      at += 1;
    } else if (text[at] === "[") {
      depth += 1;
    } else if (text[at] === "]" && --depth === 0) {
      close = at;
      break;
    }
  }
  if (close < 0 || text[close + 1] !== "(") {
    return null;
  }
  DESTINATION.lastIndex = close + 1;
  const found = DESTINATION.exec(text);
  if (!found) {
    return null;
  }
  const address = found[1].replace(/^<(.*)>$/, "$1").replace(/\\(.)/g, "$1");
  const label = text.slice(open + 1, close);
  const title = found[2] ? found[2].slice(1, -1) : "";
  return { node: anchor(address, label, image, title), end: DESTINATION.lastIndex };
}

function anchor(address, label, image, title) {
  const href = safeUrl(address);
  if (href === null) {
    // not a link the page will follow: its text stays, marked
    const span = document.createElement("span");
    span.className = "unsafe-link";
    span.title = "link removed: only http, https and mailto links are kept";
    appendInline(image ? label || "image" : label, span, false);
    return span;
  }
  const a = document.createElement("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  if (title) {
    a.title = title;
  }
  if (image) {
    a.className = "image-link"; // an image is linked, never loaded
    a.append(`image: ${label || href}`);
  } else {
    appendInline(label, a, false);
  }
  return a;
}

function autolink(text, i) {
  if (text[i] !== "<") {
    return null;
  }
  AUTOLINK.lastIndex = i;
  const found = AUTOLINK.exec(text);
  if (!found || safeUrl(found[1]) === null) {
    return null;
  }
  const node = anchor(found[1], "", false, "");
  node.append(found[1].replace(/^mailto:/, "")); // an address is shown as it is written
  return { node, end: AUTOLINK.lastIndex };
}

function bareUrl(text, i) {
  if (text[i] !== "h" || (i > 0 && /[\w/]/.test(text[i - 1]))) {
    return null;
  }
  BARE_URL.lastIndex = i;
  const found = BARE_URL.exec(text);
  if (!found || safeUrl(found[0]) === null) {
    return null;
  }
  const node = anchor(found[0], "", false, "");
  node.append(found[0]);
  return { node, end: BARE_URL.lastIndex };
}

// a run of delimiters (its character and length) -> the element it opens and closes
const EMPHASIS = { "*1": "em", "_1": "em", "*2": "strong", "_2": "strong", "~2": "del" };

function emphasis(text, i, links) {
  const mark = text[i];
  if (mark !== "*" && mark !== "_" && mark !== "~") {
    return null;
  }
  const length = runAt(text, i);
  const tag = EMPHASIS[mark + length];
  const literal = { node: document.createTextNode(mark.repeat(length)), end: i + length };
  const inner = i + length;
  // "* " opens nothing; underscores inside words (snake_case) are letters
  if (!tag || inner >= text.length || /\s/.test(text[inner]) || (mark === "_" && /\w/.test(text[i - 1] || ""))) {
    return literal;
  }
  for (let end = text.indexOf(mark, inner + 1); end >= 0; end = text.indexOf(mark, end + 1)) {
    const run = runAt(text, end);
    const after = text[end + run] || "";
    if (run === length && !/\s/.test(text[end - 1]) && !(mark === "_" && /\w/.test(after))) {
      const element = document.createElement(tag);
      appendInline(text.slice(inner, end), element, links);
      return { node: element, end: end + run };
    }
    end += run - 1; // a run of another length (an inner **strong**) is passed whole
  }
  return literal;
}

function runAt(text, i) {
  let end = i;
  while (text[end] === text[i]) {
    end += 1;
  }
  return end - i;
}
