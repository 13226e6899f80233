// Comparing an answer with its replay (the same context, seed and settings): the page says
// "identical", or where the two part.

/** A sentence about `again` ({tokens, text}) against the `original` answer. */
export function compare(original, again) {
  const a = original.tokens;
  const b = again.tokens;
  let same = 0;
  while (same < a.length && same < b.length && a[same] === b[same]) {
    same += 1;
  }
  // A stopped answer's text lacks what was held back at the cut (part of a character): its
  // replay, cut at the same token by max_tokens, may show it.
  const textAgrees =
    original.text === again.text ||
    (original.finish === "cancelled" && again.text.startsWith(original.text));
  if (same === a.length && same === b.length && textAgrees) {
    return `identical: the same ${a.length} tokens, the same text`;
  }
  if (same === a.length && same === b.length) {
    return `differs in text only: ${where(original.text, again.text)}`;
  }
  return `differs from token ${same + 1} (of ${a.length} here, ${b.length} in the replay): ${where(
    original.text,
    again.text,
  )}`;
}

function where(first, second) {
  let at = 0;
  while (at < first.length && at < second.length && first[at] === second[at]) {
    at += 1;
  }
  const show = (text) => JSON.stringify(text.slice(at, at + 24));
  return `at character ${at + 1}, ${show(first)} here, ${show(second)} in the replay`;
}
