// The reasoning some models write before their answer, between <think> and </think> (Qwen 3,
// DeepSeek-R1 distills...), taken apart from the answer so that the page shows it collapsed.
// A template that opens the tag itself leaves only the closing one in the text.

const OPEN = "<think>";
const CLOSE = "</think>";

/** {reasoning, answer, thinking}: `thinking` while the reasoning is not closed yet. */
export function splitReasoning(text) {
  const start = text.trimStart();
  const close = text.indexOf(CLOSE);
  if (start.startsWith(OPEN)) {
    const body = start.slice(OPEN.length);
    const end = body.indexOf(CLOSE);
    if (end < 0) {
      return { reasoning: body.trim(), answer: "", thinking: true };
    }
    return { reasoning: body.slice(0, end).trim(), answer: body.slice(end + CLOSE.length), thinking: false };
  }
  if (close >= 0 && !text.slice(0, close).includes(OPEN)) {
    return { reasoning: text.slice(0, close).trim(), answer: text.slice(close + CLOSE.length), thinking: false };
  }
  return { reasoning: "", answer: text, thinking: false };
}
