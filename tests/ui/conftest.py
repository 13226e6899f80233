"""Fixtures of the browser tests: a real `llamay serve` (with and without an API key) serving
Gemma 3 270M, and a fresh headless Chromium per test (helpers/chat_page.py). Without Chromium
and its driver the tests skip, saying how to install them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.chat_page import ChatPage, find_chromium, start_browser
from helpers.serving import API_KEY, Server, start_server, stop_server


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    pytest.importorskip("selenium", reason="the browser tests need Selenium (the test extra)")
    browser, driver, why_not = find_chromium()
    if browser is None or driver is None:
        pytest.skip(why_not)
    return browser, driver


@pytest.fixture(scope="module")
def server(tmp_path_factory, gemma_path) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("ui-serve-home"))
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory, gemma_path) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("ui-serve-home-key"), api_key=API_KEY)
    yield running
    stop_server(running)


@pytest.fixture
def downloads(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    return folder


@pytest.fixture
def browser(chromium, downloads) -> Iterator:
    chrome = start_browser(*chromium, downloads)
    yield chrome
    chrome.quit()


@pytest.fixture
def page(browser, server) -> ChatPage:
    return ChatPage(browser, server.base_url)
