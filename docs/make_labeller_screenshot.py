"""Take docs/labeller.png: the labelling widget (``Labeller.widget()``) in a real JupyterLab, in headless Chromium.

    python docs/make_labeller_screenshot.py                  # docs/labeller.png
    python docs/make_labeller_screenshot.py --png out.png

It starts JupyterLab (``jupyter lab --no-browser`` on a free port of 127.0.0.1, with a token, in a
temporary root directory, every Jupyter config, data, runtime and settings directory isolated there),
opens there a copy of the tutorial's labelling notebook (``notebooks/08_labelling.ipynb``, its cells up
to the widget), runs them through JupyterLab's Run menu, gives six labels by clicking the widget's
buttons, reveals the judge's score, folds the file browser and saves a screenshot of the window with
the widget in view. Needs Debian's chromium and chromium-driver, selenium (the ``dev`` extra) and
JupyterLab with ipywidgets (the ``notebooks`` extra). Nothing here reaches the network.

The JupyterLab machinery here (:class:`JupyterLab`, :func:`chromium`, :func:`open_notebook`,
:func:`run_all`, :func:`restart_kernel`) is also what ``tests/views/test_labeller_browser.py`` drives, so the
screenshot is taken along the path the test checks.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
# User settings of the isolated JupyterLab: no news feed nor update check (they would reach the network), and
# a notebook starts its kernel without asking which (else a "Select Kernel" dialog may race the first click).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"autoStartDefaultKernel": True},
}


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterLab:
    """A JupyterLab server of our own: ``jupyter lab --no-browser`` on 127.0.0.1, a token, isolated directories.

    ``root`` is the directory it serves (notebooks go there); ``home`` holds the Jupyter config, data,
    runtime and settings directories (isolated from the user's), and the server's log. Use it as a
    context manager: the server has started and answers ``/api/status`` when ``__enter__`` returns, and
    is stopped (with its kernels: the whole process group) when the block ends, whatever happens.
    :class:`RuntimeError` with the end of the log when it does not start within ``timeout`` seconds.
    """

    def __init__(self, root: Path, home: Path, *, timeout: float = 60.0) -> None:
        self.root, self.home, self.timeout = Path(root), Path(home), timeout
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._up = False
        self._reader: threading.Thread | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
                "JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
                "IPYTHONDIR": "ipython", "MPLCONFIGDIR": "mpl"}
        for name, sub in dirs.items():
            (self.home / sub).mkdir(parents=True, exist_ok=True)
            env[name] = str(self.home / sub)
        for file, settings in LAB_SETTINGS.items():
            (self.home / "settings" / file).parent.mkdir(parents=True, exist_ok=True)
            (self.home / "settings" / file).write_text(json.dumps(settings), encoding="utf-8")
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                "--ServerApp.open_browser=False", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])]

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.log.append(line.rstrip("\n"))
            if f"127.0.0.1:{self.port}/" in line:
                self._up = True
                self._ready.set()
        self._ready.set()  # the server ended: stop waiting (start() then finds it dead)

    def start(self) -> JupyterLab:
        self.proc = subprocess.Popen(self.command(), cwd=self.root, env=self.env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        if not self._ready.wait(self.timeout) or not self._up or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("JupyterLab did not start:\n" + "\n".join(self.log[-30:]))
        # it printed its address; it may take a moment more to answer: ask /api/status until it does
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=10) as answer:
                    json.load(answer)
                return self
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("JupyterLab does not answer:\n" + "\n".join(self.log[-30:])) from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server and its kernels: SIGTERM to the process group it leads (it started in a session
        of its own, so the group is its pid), SIGKILL after 15 s, then SIGKILL to whatever of the group
        outlived it."""
        if self.proc is None:
            return
        group = self.proc.pid
        if self.proc.poll() is None:
            os.killpg(group, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(group, signal.SIGKILL)
                self.proc.wait(5)
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self._reader is not None:
            self._reader.join(10)  # the log's end: the pipe is at EOF once every process holding it ended
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def api(self, path: str) -> Any:
        """GET ``/api/<path>`` of the server, as JSON."""
        with urllib.request.urlopen(f"{self.url}/api/{path}?token={self.token}", timeout=10) as answer:
            return json.load(answer)

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}"

    def __enter__(self) -> JupyterLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def chromium(profile: Path, *, size: str = "1400,1000") -> Any:
    """A headless Debian chromium driven by selenium through chromedriver, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={size}", "--hide-scrollbars", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait(driver: Any, condition: Callable[[Any], Any], timeout: float = 30.0, message: str = "") -> Any:
    """``WebDriverWait(...).until(condition)``, polling every 0.1 s; an element JupyterLab re-rendered
    meanwhile (stale) or one covered for a moment counts as not yet."""
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (StaleElementReferenceException, ElementClickInterceptedException)
    return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored).until(condition, message)


def click(driver: Any, selector: str, timeout: float = 30.0) -> None:
    """Click the first visible element matching ``selector``, once it is there and takes the click."""

    def clicked(d: Any) -> bool:
        element = css(selector)(d)
        if element:
            element.click()
        return bool(element)

    wait(driver, clicked, timeout, f"could not click {selector}")


def css(selector: str) -> Callable[[Any], Any]:
    """A wait condition: the first visible element matching ``selector``."""
    from selenium.webdriver.common.by import By

    def found(driver: Any) -> Any:
        for element in driver.find_elements(By.CSS_SELECTOR, selector):
            if element.is_displayed():
                return element
        return False

    return found


def kernel_idle(lab: JupyterLab) -> Callable[[Any], bool]:
    """A wait condition: the open notebook's kernel is idle, as the page shows it (the toolbar's status) and
    as the server knows it (``/api/kernels``: one kernel, idle, with the page connected to it)."""
    from selenium.webdriver.common.by import By

    def idle(driver: Any) -> bool:
        status = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) "
                                                       ".jp-Notebook-ExecutionIndicator")
        if not status or status[0].get_attribute("data-status") != "idle":
            return False
        kernels = lab.api("kernels")
        return len(kernels) == 1 and kernels[0]["execution_state"] == "idle" and kernels[0]["connections"] >= 1

    return idle


def open_notebook(driver: Any, lab: JupyterLab, name: str, timeout: float = 60.0) -> None:
    """Open ``name`` (in the server's root) in JupyterLab and wait for its kernel to be idle."""
    driver.get(lab.notebook_url(name))
    cell = wait(driver, css(".jp-NotebookPanel .jp-Notebook .jp-Cell .jp-InputArea-prompt"), timeout,
                "the notebook did not open")
    wait(driver, kernel_idle(lab), timeout, "the kernel did not start")
    cell.click()  # the notebook is the current widget: the Run and Kernel menus act on it


def menu(driver: Any, title: str, command: str, timeout: float = 15.0) -> None:
    """Click the main menu ``title`` (``Run``, ``Kernel``...) and its item running ``command``."""
    from selenium.webdriver.common.by import By

    def menu_bar_item(d: Any) -> Any:
        for item in d.find_elements(By.CSS_SELECTOR, "#jp-MainMenu .lm-MenuBar-item"):
            if item.text.strip() == title:
                return item
        return False

    wait(driver, lambda d: menu_bar_item(d) and (menu_bar_item(d).click() or True), timeout, f"no {title} menu")
    item = f'.lm-Menu-item[data-command="{command}"]:not(.lm-mod-disabled)'
    click(driver, item, timeout)


def run_all(driver: Any, lab: JupyterLab, timeout: float = 60.0) -> None:
    """Edit > Clear Outputs of All Cells, then Run > Run All Cells, and wait until every code cell has run
    and the kernel is idle. Clearing first means no output (no widget) of an earlier run or kernel is
    left to be mistaken for this run's, and an unrun cell's prompt is ``[ ]:`` until it runs."""
    menu(driver, "Edit", "editmenu:clear-all")
    menu(driver, "Run", "runmenu:run-all")

    def done(d: Any) -> bool:
        from selenium.webdriver.common.by import By

        prompts = d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) "
                                                   ".jp-CodeCell .jp-InputArea-prompt")
        return bool(prompts) and all(p.text.strip() not in ("", "[ ]:", "[*]:") for p in prompts) \
            and kernel_idle(lab)(d)

    wait(driver, done, timeout, "the cells did not finish")


def restart_kernel(driver: Any, lab: JupyterLab, timeout: float = 60.0) -> None:
    """Kernel > Restart Kernel..., confirm in the dialog, and wait for the new kernel to be idle."""
    menu(driver, "Kernel", "kernelmenu:restart")
    click(driver, ".jp-Dialog .jp-Dialog-button.jp-mod-accept", timeout)
    wait(driver, lambda d: not css(".jp-Dialog")(d), timeout, "the dialog stayed open")
    wait(driver, kernel_idle(lab), timeout, "the kernel did not restart")


def widget_text(driver: Any, selector: str) -> str:
    """The text of the first visible element matching ``selector``; ``""`` when there is none (yet)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        element = css(selector)(driver)
        return element.text if element else ""
    except StaleElementReferenceException:
        return ""


def notebook_up_to_widget(source: Path, target: Path) -> Path:
    """Write the tutorial's cells up to (and with) the one showing ``labeller.widget()`` to ``target``."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "labeller.widget()" in cell.source:
            nb.cells = nb.cells[: i + 1]
            break
    else:
        raise ValueError(f"{source} has no cell showing labeller.widget()")
    nbformat.write(nb, target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--png", default=str(REPO / "docs" / "labeller.png"), help="where to save the screenshot")
    parser.add_argument("--labels", type=int, default=6, help="labels to give by clicking before the screenshot")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="llmc-labeller-shot-"))
    try:
        root = work / "root"
        (root / "data").mkdir(parents=True)
        shutil.copy(REPO / "data" / "qa_calibration.jsonl", root / "data")
        (root / "notebooks").mkdir()
        shutil.copy(REPO / "notebooks" / "tutorial_helpers.py", root / "notebooks")
        notebook_up_to_widget(REPO / "notebooks" / "08_labelling.ipynb", root / "notebooks" / "labelling.ipynb")
        with JupyterLab(root, work / "home") as lab:
            driver = chromium(work / "profile", size="1280,900")
            try:
                open_notebook(driver, lab, "notebooks/labelling.ipynb")
                run_all(driver, lab, timeout=180)
                wait(driver, css(".llmc-labeller .llmc-item-id"), 60, "the widget did not render")
                for i in range(args.labels):
                    before = widget_text(driver, ".llmc-labeller .llmc-item-id")
                    button = ".llmc-correct" if i % 3 != 1 else ".llmc-incorrect"
                    click(driver, f".llmc-labeller {button}")
                    wait(driver, lambda d, b=before: widget_text(d, ".llmc-labeller .llmc-item-id") not in ("", b))
                click(driver, ".llmc-labeller .llmc-reveal")
                wait(driver, lambda d: "Hide judge" in widget_text(d, ".llmc-labeller .llmc-reveal"), 30,
                     "the judge's score was not revealed")
                wait(driver, lambda d: widget_text(d, ".llmc-labeller .llmc-progress").startswith(
                    f"{args.labels} labelled"), 30, "the progress line did not count the labels")
                click(driver, ".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")  # fold the file browser
                wait(driver, lambda d: not css("#filebrowser")(d), 15, "the file browser stayed open")
                widget = wait(driver, css(".llmc-labeller"))
                driver.execute_script("arguments[0].scrollIntoView({block: 'end'});", widget)
                wait(driver, lambda d: d.execute_script(
                    "const r = arguments[0].getBoundingClientRect(); return r.bottom <= window.innerHeight;",
                    widget), 15, "the widget is not in view")
                driver.save_screenshot(args.png)
            finally:
                driver.quit()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
