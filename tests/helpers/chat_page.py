"""Driving the chat page (`llamay serve`'s /ui) in a real headless Chromium, by the
`data-testid` names docs/ui.md lists, as the browser tests do.

Debian's `chromium` and `chromium-driver` packages provide the browser and its driver; Selenium
(the `test` extra) talks to them. `find_chromium()` says where they are, or why not.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Generations on a loaded two-core machine: generous, the waits end as soon as they can.
WAIT_S = 180.0


def find_chromium() -> tuple[str | None, str | None, str]:
    """(chromium, chromedriver, why not): the two programs, or None and the reason."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        return None, None, "no chromium, chromium-driver: apt-get install chromium chromium-driver"
    return browser, driver, ""


def start_browser(browser: str, driver: str, downloads: Path, width: int = 1100) -> Any:
    """A headless Chromium that saves downloads in `downloads`."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},900",
    ):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(
        service=webdriver.ChromeService(executable_path=driver), options=options
    )
    chrome.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    return chrome


def wait_for(driver: Any, condition: Callable[[], Any], what: str, seconds: float = WAIT_S) -> Any:
    """Polls `condition` (WebDriverWait) until it returns something true, which is returned;
    fails naming `what` after `seconds`. An element replaced while it was read is read again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    waiting = WebDriverWait(
        driver, seconds, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
    )
    return waiting.until(lambda _: condition(), f"timed out waiting for {what}")


class ChatPage:
    """The page at `base_url` in `driver`, found by data-testid."""

    def __init__(self, driver: Any, base_url: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver = driver
        self.base_url = base_url
        self.by = By

    def open(self, path: str = "/") -> None:
        self.driver.get(self.base_url + path)
        self.wait(
            lambda: self.driver.execute_script("return document.readyState") == "complete",
            "the page to load",
        )

    def wait(self, condition: Callable[[], Any], what: str, seconds: float = WAIT_S) -> Any:
        return wait_for(self.driver, condition, what, seconds)

    def all(self, testid: str, **attributes: str) -> list[Any]:
        selector = f'[data-testid="{testid}"]' + "".join(
            f'[data-{name}="{value}"]' for name, value in attributes.items()
        )
        return self.driver.find_elements(self.by.CSS_SELECTOR, selector)

    def one(self, testid: str) -> Any:
        return self.wait(lambda: (self.all(testid) or [None])[0], f"[data-testid={testid}]")

    def texts(self, role: str) -> list[str]:
        """The text of each message of `role` shown, in order."""
        return [element.text for element in self.all("message", role=role)]

    def turn(self, index: int) -> Any:
        """The index-th message shown (its list item, with its controls)."""
        return self.driver.find_elements(self.by.CSS_SELECTOR, "#conversation > li")[index]

    def control(self, index: int, testid: str) -> Any:
        return self.turn(index).find_element(self.by.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def click(self, element: Any) -> None:
        self.wait(element.is_enabled, "a control to be enabled")
        element.click()

    def idle(self) -> None:
        """Waits until no operation runs (Send enabled, Stop disabled)."""
        self.wait(
            lambda: self.one("send").is_enabled() and not self.one("stop").is_enabled(),
            "the page to be idle",
        )

    def send(self, text: str, *, with_enter: bool = False) -> None:
        from selenium.webdriver.common.keys import Keys

        box = self.one("message-input")
        box.clear()
        box.send_keys(text)
        if with_enter:
            box.send_keys(Keys.ENTER)
        else:
            self.click(self.one("send"))

    def set_sampling(self, **values: Any) -> None:
        """Sets fields of the settings form (temperature, top_p, seed, max_tokens, system): opens
        the settings, fills them in, closes them."""
        toggle = self.one("settings")
        toggle.click()
        assert toggle.get_attribute("aria-expanded") == "true"
        for name, value in values.items():
            field = self.driver.find_element(self.by.NAME, name)
            field.clear()
            field.send_keys(str(value))
        toggle.click()
        assert toggle.get_attribute("aria-expanded") == "false"

    def stats(self) -> str:
        """The line under the composer: the context's fill and its pages."""
        return self.driver.find_element(self.by.ID, "stats").text

    def alert(self) -> str:
        element = self.driver.find_element(self.by.ID, "alert")
        return element.text if element.is_displayed() else ""
