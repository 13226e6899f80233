"""The page's Markdown renderer (webui/markdown.js) in a real Chromium: what it makes of
Markdown, and that no input — hostile or random — makes an element outside its short list, an
attribute outside its short list, or a link that is not http, https or mailto."""

from __future__ import annotations

import pytest

from helpers.chat_page import ChatPage

# What markdown.js and highlight.js may make, and the attributes they may set.
ELEMENTS = {
    "a", "blockquote", "br", "button", "code", "del", "div", "em", "figcaption", "figure",
    "h3", "h4", "h5", "h6", "hr", "li", "ol", "p", "pre", "span", "strong", "table", "tbody",
    "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ATTRIBUTES = {"class", "href", "target", "rel", "title", "start", "type", "aria-label"}

# Renders each input; returns, per input, the HTML made (to compare) and every element's tag,
# attributes and href (to check). Random inputs are made in the page from markup's characters.
RENDER = """
const [inputs, randomCount, done] = arguments;
import("/ui/markdown.js").then(({ renderMarkdown }) => {
  const pieces = ["<", ">", "[", "]", "(", ")", "!", "*", "_", "`", "~", "|", "#", "-", ":",
    "\\\\", "\\n", " ", "javascript:", "https://x.y/", "mailto:a@b", "data:", "img", "onerror=",
    "\\"", "'", "&#x61;", "script", "```", "1. ", "> "];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  const all = [...inputs];
  for (let i = 0; i < randomCount; i += 1) {
    let text = "";
    const length = 1 + (next() % 40);
    for (let j = 0; j < length; j += 1) text += pieces[next() % pieces.length];
    all.push(text);
  }
  done(all.map((input) => {
    const holder = document.createElement("div");
    holder.append(renderMarkdown(input));
    const elements = [...holder.querySelectorAll("*")].map((element) => ({
      tag: element.tagName.toLowerCase(),
      attributes: [...element.attributes].map((attribute) => attribute.name),
      href: element.tagName === "A" ? element.href : null,
    }));
    return { input, html: holder.innerHTML, text: holder.textContent, elements };
  }));
});
"""

# Markup a model may write: shown as the characters it is.
MARKUP = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    '<a href="javascript:alert(1)">x</a>',
    '<svg onload="alert(1)">',
    "<javascript:alert(1)>",
    "<iframe srcdoc='<script>alert(1)</script>'>",
]
# Links to what is not http, https or mailto: their text stays, without a link.
LINKS = [
    "[a](javascript:alert(1))",
    "[a](JAVASCRIPT:alert(1))",
    "[a](  javascript:alert(1))",
    "[a](<javascript:alert(1)>)",
    "[a](jav&#x61;script:alert(1))",
    "[a](data:text/html,<script>alert(1)</script>)",
    "[a](vbscript:msgbox(1))",
    "[a](//evil.example/x)",
    "![a](javascript:alert(1))",
]


@pytest.fixture
def rendered(page: ChatPage):
    page.open("/ui")

    def render(inputs: list[str], random_count: int = 0) -> list[dict]:
        return page.driver.execute_async_script(RENDER, inputs, random_count)

    return render


def test_markdown_renders_what_answers_use(rendered):
    cases = {
        "**bold** and *em* and ~~gone~~ and `x < y`": (
            "<p><strong>bold</strong> and <em>em</em> and <del>gone</del> and "
            "<code>x &lt; y</code></p>"
        ),
        "# Title\n\ntext\nnext line": "<h3>Title</h3><p>text<br>next line</p>",
        "- one\n- two\n  - deeper\n\n3. three": (
            '<ul><li>one</li><li><p>two</p><ul><li>deeper</li></ul></li></ul><ol start="3">'
            "<li>three</li></ol>"
        ),
        "> quoted\n\n---": "<blockquote><p>quoted</p></blockquote><hr>",
        "[site](https://example.com/a_b) and https://example.org.": (
            '<p><a href="https://example.com/a_b" target="_blank" rel="noopener noreferrer '
            'nofollow">site</a> and <a href="https://example.org/" target="_blank" '
            'rel="noopener noreferrer nofollow">https://example.org</a>.</p>'
        ),
        "![a cat](https://example.com/cat.png)": (
            '<p><a href="https://example.com/cat.png" target="_blank" rel="noopener noreferrer '
            'nofollow" class="image-link">image: a cat</a></p>'
        ),
        "| a | b |\n|:--|--:|\n| 1 | 2 |": (
            '<div class="table"><table><thead><tr><th class="align-left">a</th>'
            '<th class="align-right">b</th></tr></thead><tbody><tr><td class="align-left">1'
            '</td><td class="align-right">2</td></tr></tbody></table></div>'
        ),
        "snake_case_name and 2 * 3 * 4": "<p>snake_case_name and 2 * 3 * 4</p>",
    }
    results = rendered(list(cases))
    for result, expected in zip(results, cases.values(), strict=True):
        assert result["html"] == expected, result["input"]


def test_code_blocks_are_highlighted_text_with_a_copy_button(rendered):
    [result] = rendered(['```python\ndef f(x):  # add\n    return x + 1 if x else "no"\n```'])
    assert result["html"] == (
        '<figure class="code"><figcaption><span>python</span><button type="button" '
        'class="copy" aria-label="Copy code"></button></figcaption><pre><code>'
        '<span class="hl-keyword">def</span> f(x):  <span class="hl-comment"># add</span>\n'
        '    <span class="hl-keyword">return</span> x + <span class="hl-number">1</span> '
        '<span class="hl-keyword">if</span> x <span class="hl-keyword">else</span> '
        '<span class="hl-string">"no"</span></code></pre></figure>'
    )


def test_no_input_makes_anything_but_the_allowed_elements_and_links(rendered):
    results = rendered([*MARKUP, *LINKS], random_count=3000)
    for result in results:
        for element in result["elements"]:
            assert element["tag"] in ELEMENTS, result["input"]
            assert set(element["attributes"]) <= ATTRIBUTES, result["input"]
            if element["href"] is not None:
                assert element["href"].startswith(("http://", "https://", "mailto:")), result
    for result in results[: len(MARKUP)]:
        assert result["html"].startswith("<p>") and result["text"] == result["input"]
        assert [element["tag"] for element in result["elements"]] == ["p"]
    for result in results[len(MARKUP) : len(MARKUP) + len(LINKS)]:
        assert result["text"] == "a", result["input"]
        assert [element["tag"] for element in result["elements"]] == ["p", "span"]
