"""One headless Chromium for every browser test of ``tests/views/`` (a launch costs seconds on a busy machine).

:func:`chromium` starts Debian's ``chromium`` through ``chromedriver`` once for the session, with a fresh
profile; :func:`open_chromium` hands it to a test module as a fresh page would be: on ``about:blank``, its
console log read away, the window at the module's size, scrollbars shown or hidden as the module asks (the
CDP's ``Emulation.setScrollbarsHidden``, what the ``--hide-scrollbars`` flag does), cookies cleared. Each
module's own ``browser`` fixture takes it that way.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,900")


@pytest.fixture(scope="session")
def chromium():
    """The session's headless Chromium (skipped without it, but on CI, where it must be there)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        message = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="llmc-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def open_chromium(chromium):
    """``open_chromium(width, height, scrollbars=True)``: the session's Chromium as a fresh window of that size."""

    def fresh(width: int, height: int, *, scrollbars: bool = True):
        chromium.get("about:blank")
        chromium.delete_all_cookies()
        chromium.get_log("browser")  # what earlier pages said is read away: a test sees its own page's messages
        chromium.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": not scrollbars})
        chromium.set_window_size(width, height)
        return chromium

    return fresh
