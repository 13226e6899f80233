"""The chat page in a real headless Chromium against a real `llamay serve` running Gemma 3
270M, driven by the page's data-testid names (docs/ui.md): streaming, stopping, branches,
snapshots, replay, the API key, and markup in answers that must stay inert.

Answers are sampled with fixed seeds, so each run sees the same text; a branch's answer is
told from another's by its text, and a replay must give the same tokens and text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx

from helpers.chat_page import ChatPage, start_browser
from helpers.serving import API_KEY, MODEL

# docs/ui.md's pictures: the tour takes them; LLAMAY_UPDATE_SCREENSHOTS=1 saves them there
# (else they go to the test's own folder, and the source tree stays as it is).
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
FIRST = "List three colours."
EDITED = "List three fruits."
FOLLOW_UP = "And three more?"


def screenshot(page: ChatPage, folder: Path, name: str) -> None:
    folder.mkdir(exist_ok=True)
    assert page.driver.save_screenshot(str(folder / name))
    assert (folder / name).read_bytes().startswith(b"\x89PNG")


def choose_model(page: ChatPage) -> None:
    from selenium.webdriver.support.ui import Select

    select = page.one("model-select")
    page.wait(
        lambda: MODEL in [o.get_attribute("value") for o in Select(select).options],
        "the model list",
    )
    Select(select).select_by_value(MODEL)


def label(page: ChatPage, index: int) -> str:
    return page.control(index, "branch-label").text


def meta(page: ChatPage, index: int) -> str:
    return page.turn(index).find_element(page.by.CSS_SELECTOR, ".meta").text


def replay(page: ChatPage, index: int) -> str:
    page.click(page.control(index, "replay"))
    page.idle()
    return page.wait(lambda: page.control(index, "replay-result").text, "the replay's result")


def downloaded(folder: Path) -> Path:
    """The snapshot the page saved, once the browser has finished writing it."""
    from selenium.webdriver.support.ui import WebDriverWait

    def done(_) -> Path | None:
        files = list(folder.iterdir())  # a download in progress is a .crdownload beside it
        if len(files) == 1 and files[0].suffix == ".llamay" and files[0].stat().st_size:
            return files[0]
        return None

    return WebDriverWait(None, 60, poll_frequency=0.05).until(done, "the snapshot download")


def console_problems(page: ChatPage) -> list[str]:
    """What the browser's console says went wrong, but the 401s the key test causes."""
    entries = page.driver.get_log("browser")
    return [
        entry["message"]
        for entry in entries
        if entry["level"] == "SEVERE" and "401 (Unauthorized)" not in entry["message"]
    ]


def walk_through(page: ChatPage, downloads: Path, *, pictures: Path | None = None) -> None:
    """Everything a user does in docs/ui.md's tour, checked step by step."""
    choose_model(page)
    page.set_sampling(temperature=0.8, seed=1, max_tokens=200)

    # Tokens stream in, and Stop ends the answer where it is.
    page.send(FIRST)
    lengths: list[int] = []

    def streamed() -> bool:
        texts = page.texts("assistant")
        if texts and texts[0] and (not lengths or len(texts[0]) > lengths[-1]):
            lengths.append(len(texts[0]))
        return len(lengths) >= 3

    page.wait(streamed, "the answer to stream in")
    page.click(page.one("stop"))
    page.idle()
    assert page.texts("user") == [FIRST]
    first = page.texts("assistant")[0]
    assert len(first) >= lengths[-1]
    stopped = meta(page, 1)
    assert "stopped" in stopped
    assert int(re.match(r"(\d+) tokens", stopped).group(1)) < 200
    assert page.all("branch-label") == []

    # Regenerate: a second answer beside the first, 2/2; the first is one click away.
    page.set_sampling(seed=2, max_tokens=24)
    page.click(page.control(1, "regenerate"))
    page.wait(lambda: label(page, 1) == "2/2", "the label 2/2")
    page.idle()
    second = page.texts("assistant")[0]
    assert second and second != first
    page.click(page.control(1, "branch-prev"))
    page.wait(lambda: label(page, 1) == "1/2", "the label 1/2")
    assert page.texts("assistant") == [first]
    assert not page.control(1, "branch-prev").is_enabled()

    # Replay: the same context, seed and settings give the same answer (a stopped one, to the
    # token it stopped at).
    assert replay(page, 1).startswith("identical")
    page.click(page.control(1, "branch-next"))
    page.wait(lambda: label(page, 1) == "2/2", "the label 2/2")
    assert page.texts("assistant") == [second]
    assert replay(page, 1).startswith("identical")

    # Edit the first message: a new branch of the whole conversation.
    page.click(page.control(0, "edit"))
    assert page.one("message-input").get_attribute("value") == FIRST
    page.send(EDITED)
    page.wait(lambda: label(page, 0) == "2/2", "the edited message's label 2/2")
    page.idle()
    assert page.texts("user") == [EDITED]
    edited_answer = page.texts("assistant")[0]
    page.click(page.control(0, "branch-prev"))
    page.wait(lambda: label(page, 0) == "1/2", "the first message's label 1/2")
    assert page.texts("user") == [FIRST]
    assert page.texts("assistant") == [second]
    assert label(page, 1) == "2/2"
    if pictures:
        screenshot(page, pictures, "ui-branches.png")
    page.click(page.control(0, "branch-next"))
    page.wait(lambda: page.texts("user") == [EDITED], "the edited branch")
    assert page.texts("assistant") == [edited_answer]

    # Download a snapshot, reload the page, open the snapshot: the conversation is back.
    page.click(page.one("snapshot-download"))
    snapshot = downloaded(downloads)
    assert snapshot.read_bytes().startswith(b"LLAMAYKV")
    page.driver.refresh()
    choose_model(page)
    assert page.all("message") == []
    page.one("snapshot-open").send_keys(str(snapshot))
    page.wait(lambda: page.texts("user") == [EDITED], "the snapshot's conversation")
    page.idle()
    assert page.texts("assistant") == [edited_answer]

    # ...and continue from where it stopped (Enter sends), then replay that answer.
    page.set_sampling(temperature=0.8, seed=3, max_tokens=24)
    page.send(FOLLOW_UP, with_enter=True)
    page.wait(lambda: len(page.texts("assistant")) == 2, "the answer after the snapshot")
    page.idle()
    assert page.texts("user") == [EDITED, FOLLOW_UP]
    assert page.texts("assistant")[1]
    assert replay(page, 3).startswith("identical")
    # the answer's context shares the pages of the conversation before it (its full ones)
    stats = page.wait(
        lambda: re.fullmatch(
            r"context (\d+) / 1024 tokens \(\d+%\) · pages: (\d+) shared, (\d+) own", page.stats()
        ),
        "the context's stats",
    )
    assert int(stats.group(2)) >= 1 and int(stats.group(3)) >= 1
    if pictures:
        screenshot(page, pictures, "ui-chat.png")
    assert page.alert() == ""


def test_the_page_streams_branches_saves_and_replays(page, server, downloads, tmp_path):
    page.open("/")
    assert page.driver.title == "llamay"
    update = os.environ.get("LLAMAY_UPDATE_SCREENSHOTS") == "1"
    walk_through(page, downloads, pictures=IMAGES if update else tmp_path / "pictures")
    assert console_problems(page) == []


def test_the_same_with_an_api_key(chromium, keyed_server, downloads):
    browser = start_browser(*chromium, downloads)
    try:
        page = ChatPage(browser, keyed_server.base_url)
        page.open("/")
        key = page.one("api-key")
        page.wait(key.is_displayed, "the page to ask for the key")
        assert page.all("message") == []
        key.send_keys(API_KEY)
        choose_model(page)
        page.wait(lambda: not key.is_displayed(), "the key to be accepted")
        stored = browser.execute_script("return sessionStorage.getItem('llamay.apiKey')")
        assert stored == API_KEY
        walk_through(page, downloads)
        # the key stays for the tab: a reload does not ask again
        browser.refresh()
        choose_model(page)
        assert not page.one("api-key").is_displayed()
        assert console_problems(page) == []
    finally:
        browser.quit()


def test_the_first_element_of_each_name_is_the_one_meant(page, server, downloads):
    """A script that takes the first element with each data-testid (as a quick test does)
    finds the one it means at each step of the tour."""
    page.open("/")
    choose_model(page)
    page.set_sampling(seed=5, max_tokens=16)
    page.send("Hello")
    page.wait(lambda: page.texts("assistant") and page.texts("assistant")[0], "an answer")
    page.idle()
    first = page.texts("assistant")[0]
    page.set_sampling(seed=6)
    page.click(page.one("regenerate"))
    page.wait(lambda: page.one("branch-label").text == "2/2", "2/2")
    page.idle()
    page.click(page.one("branch-prev"))
    page.wait(lambda: page.one("branch-label").text == "1/2", "1/2")
    assert page.one("message").get_attribute("data-role") == "user"
    assert page.all("message", role="assistant")[0].text == first
    page.click(page.one("snapshot-download"))
    snapshot = downloaded(downloads)
    page.driver.refresh()
    choose_model(page)
    # the settings are kept across the reload
    assert page.driver.find_element(page.by.NAME, "max_tokens").get_attribute("value") == "16"
    page.one("snapshot-open").send_keys(str(snapshot))
    page.wait(lambda: page.texts("assistant") == [first], "the snapshot's conversation")
    page.idle()
    page.send("Again")
    page.wait(lambda: len(page.texts("assistant")) == 2, "the next answer")
    page.idle()
    page.click(page.one("replay"))
    page.wait(lambda: "identical" in page.one("replay-result").text, "identical")


HOSTILE = (
    "Look: <img src=x onerror=\"document.title='pwned'\"> "
    "[click me](javascript:document.title='pwned') "
    "[and me](JaVaScRiPt:document.title='pwned') "
    '<script>document.title="pwned"</script> '
    "**bold** and `code`"
)


def test_markup_in_an_answer_stays_inert(page, server, downloads):
    # An answer holding markup, as a model could write it: a context whose open answer is
    # that text (a prefill), saved as a snapshot and opened in the page.
    with httpx.Client(base_url=server.base_url, timeout=120) as api:
        made = api.post(
            "/llamay/v1/contexts",
            json={
                "model": MODEL,
                "messages": [
                    {"role": "user", "content": 'Say <img src=x onerror="alert(1)">'},
                    {"role": "assistant", "content": HOSTILE},
                ],
            },
        )
        assert made.status_code == 201, made.text
        snapshot = api.get(f"/llamay/v1/contexts/{made.json()['id']}/snapshot")
        assert snapshot.status_code == 200
    path = downloads / "hostile.llamay"
    path.write_bytes(snapshot.content)

    page.open("/ui")
    choose_model(page)
    page.one("snapshot-open").send_keys(str(path))
    page.wait(lambda: page.texts("assistant"), "the opened answer")
    page.idle()
    answer = page.all("message", role="assistant")[0]
    by = page.by.CSS_SELECTOR
    # the markup shows as text; nothing of it became an element
    assert "<img src=x onerror=\"document.title='pwned'\">" in answer.text
    assert "<script>" in answer.text
    assert answer.find_elements(by, "img, script, iframe") == []
    assert answer.find_elements(by, "a") == []
    unsafe = [span.text for span in answer.find_elements(by, ".unsafe-link")]
    assert unsafe == ["click me", "and me"]
    # while Markdown itself renders
    assert [element.text for element in answer.find_elements(by, "strong")] == ["bold"]
    assert [element.text for element in answer.find_elements(by, "code")] == ["code"]
    question = page.all("message", role="user")[0]
    assert question.text == 'Say <img src=x onerror="alert(1)">'
    assert page.driver.find_elements(by, "#conversation img") == []
    assert page.driver.title == "llamay"
    assert console_problems(page) == []


def test_the_page_fits_a_phone(chromium, server, downloads):
    browser = start_browser(*chromium, downloads, width=390)
    try:
        page = ChatPage(browser, server.base_url)
        page.open("/ui")
        choose_model(page)
        page.set_sampling(seed=1, max_tokens=8)
        page.send(FIRST)
        page.wait(lambda: page.texts("assistant"), "an answer")
        page.idle()
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
    finally:
        browser.quit()
