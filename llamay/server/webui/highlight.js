// A small code highlighter: comments, strings, numbers and keywords of the languages models
// write most, as spans holding text (never HTML). Enough to read an answer's code at a
// glance; it is a tokenizer, not a parser.

const C_LIKE = { line: "//", block: true };
const HASH = { line: "#", block: false };
const DASHES = { line: "--", block: false };

const LANGUAGES = {
  python: {
    comments: HASH,
    triple: true,
    keywords:
      "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield match case self",
  },
  javascript: {
    comments: C_LIKE,
    backtick: true,
    keywords:
      "async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield interface type enum implements private public readonly",
  },
  c: {
    comments: C_LIKE,
    keywords:
      "auto bool break case char class const constexpr continue default delete do double else enum extern false float for goto if inline int long namespace new nullptr private protected public register return short signed sizeof static struct switch template this true typedef typename union unsigned using virtual void volatile while include define",
  },
  rust: {
    comments: C_LIKE,
    keywords:
      "as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err",
  },
  go: {
    comments: C_LIKE,
    backtick: true,
    keywords:
      "break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var",
  },
  java: {
    comments: C_LIKE,
    keywords:
      "abstract boolean break byte case catch char class const continue default do double else enum extends false final finally float for if implements import instanceof int interface long new null package private protected public return short static super switch this throw throws true try void while var fun val when",
  },
  shell: {
    comments: HASH,
    keywords:
      "if then else elif fi for while until do done case esac in function return local export echo exit set unset source",
  },
  sql: {
    comments: DASHES,
    caseless: true,
    keywords:
      "select from where and or not insert into values update set delete create table drop alter index join left right inner outer on group by order having limit as distinct null is in like between union all primary key foreign references",
  },
  json: { comments: null, keywords: "true false null" },
};

const ALIASES = {
  py: "python",
  js: "javascript",
  jsx: "javascript",
  ts: "javascript",
  tsx: "javascript",
  typescript: "javascript",
  mjs: "javascript",
  cpp: "c",
  "c++": "c",
  h: "c",
  hpp: "c",
  cs: "java",
  csharp: "java",
  kotlin: "java",
  kt: "java",
  rs: "rust",
  golang: "go",
  sh: "shell",
  bash: "shell",
  zsh: "shell",
  console: "shell",
  yaml: "shell",
  yml: "shell",
  toml: "shell",
};

const cache = new Map();

/** `code` as a fragment of text nodes and <span class="hl-…"> elements. */
export function highlight(code, language) {
  const fragment = document.createDocumentFragment();
  const pattern = patternFor(ALIASES[language] || language);
  if (!pattern) {
    fragment.append(code);
    return fragment;
  }
  pattern.lastIndex = 0;
  let at = 0;
  for (let found = pattern.exec(code); found; found = pattern.exec(code)) {
    if (found[0] === "") {
      pattern.lastIndex += 1;
      continue;
    }
    if (found.index > at) {
      fragment.append(code.slice(at, found.index));
    }
    const span = document.createElement("span");
    span.className = `hl-${kindOf(found)}`;
    span.textContent = found[0];
    fragment.append(span);
    at = found.index + found[0].length;
  }
  if (at < code.length) {
    fragment.append(code.slice(at));
  }
  return fragment;
}

function kindOf(found) {
  if (found[1] !== undefined) return "comment";
  if (found[2] !== undefined) return "string";
  if (found[3] !== undefined) return "number";
  return "keyword";
}

function patternFor(name) {
  const spec = LANGUAGES[name];
  if (!spec) {
    return null;
  }
  if (!cache.has(name)) {
    const comments = [];
    if (spec.comments?.line) comments.push(`${escape(spec.comments.line)}[^\\n]*`);
    if (spec.comments?.block) comments.push("/\\*[\\s\\S]*?(?:\\*/|$)");
    const strings = [];
    if (spec.triple) strings.push(`"""[\\s\\S]*?(?:"""|$)`, `'''[\\s\\S]*?(?:'''|$)`);
    // a quote must close on its line to count (a Rust lifetime 'a is no string)
    strings.push(`"(?:[^"\\\\\\n]|\\\\.)*"`, `'(?:[^'\\\\\\n]|\\\\.)*'`);
    if (spec.backtick) strings.push("`(?:[^`\\\\]|\\\\.)*`");
    const number = "\\b(?:0[xX][\\da-fA-F_]+|\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)\\b";
    const keywords = `\\b(?:${spec.keywords.split(" ").map(escape).join("|")})\\b`;
    const source = [
      `(${comments.join("|") || "(?!)"})`,
      `(${strings.join("|")})`,
      `(${number})`,
      `(${keywords})`,
    ].join("|");
    cache.set(name, new RegExp(source, spec.caseless ? "gi" : "g"));
  }
  return cache.get(name);
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
