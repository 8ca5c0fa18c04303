"""Take docs/viewer.png: the judgment viewer (``llm-connect view``) in headless Chromium.

    python docs/make_viewer_screenshot.py demo-out          # the page of a demo or calibrate run
    python docs/make_viewer_screenshot.py                   # a small run on the package's test doubles

It opens the page from file://, shows the LLM judge's column sorted by disagreement with people,
opens the item it disagrees with most (the prompt the judge saw and its raw reply in the detail
pane) and saves the screenshot. Needs Debian's chromium and chromium-driver, and selenium (the
``dev`` extra). Nothing here reaches the network.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def scripted_records() -> list[dict]:
    """A calibration of 40 bundled QA items by exact match, a deterministic embedder and a scripted LLM judge."""
    import json

    import pandas as pd

    from llm_connect.calibration import calibrate
    from llm_connect.grading import EmbeddingSimilarityJudge, ExactMatchJudge, LLMJudge
    from llm_connect.testing import DeterministicEmbedder, ScriptedAdapter
    from llm_connect.views.judgments import judgment_records

    items = pd.read_json(REPO / "data" / "qa_calibration.jsonl", lines=True, dtype=False).head(40)

    def reply(prompt: str, run_config: object) -> str:
        candidate = prompt.split("Candidate answer:", 1)[1].split("<<<END CANDIDATE", 1)[0].split(">>>", 1)[1]
        words = len(candidate.split())
        score = round(min(1.0, 0.4 + 0.02 * words), 2)  # a judge that likes long answers
        return json.dumps({"notes": f"the answer has {words} words of detail", "quality_score": score})

    judges = [ExactMatchJudge(normalizer="squad", reference_sep="|"),
              EmbeddingSimilarityJudge(DeterministicEmbedder(), reference_sep="|"),
              LLMJudge(ScriptedAdapter(reply, model_id="scripted-judge"), seed=0)]
    report = calibrate(judges, items, human="human", reference_sep="|", probes="length,injection", probe_limit=10,
                       n_boot=100, progress=False)
    return judgment_records(report, title="Judgments: 40 QA items (scripted LLM judge)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", help="a calibrate/demo --out directory (default: a scripted run)")
    parser.add_argument("--png", default=str(REPO / "docs" / "viewer.png"), help="where to save the screenshot")
    parser.add_argument("--judge", default="llm-judge", help="the judge whose column is shown")
    args = parser.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from llm_connect.views import JudgmentViewer
    from llm_connect.views.judgments import JUDGMENTS_FILE, read_judgments

    records = read_judgments(Path(args.out_dir) / JUDGMENTS_FILE) if args.out_dir else scripted_records()
    work = Path(tempfile.mkdtemp(prefix="llmc-shot-"))
    try:
        page = JudgmentViewer.from_records(records).save(work / "viewer.html")
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for flag in (*FLAGS, "--window-size=1500,950", "--hide-scrollbars", f"--user-data-dir={work / 'profile'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                                  options=options)
        try:
            driver.get(page.as_uri())
            if args.judge in records[0]["judges"]:
                Select(driver.find_element(By.ID, "filter-judge")).select_by_value(args.judge)
            Select(driver.find_element(By.ID, "sort")).select_by_value("disagreement")
            driver.find_elements(By.CSS_SELECTOR, "#items tbody tr.item")[0].click()
            driver.save_screenshot(args.png)
        finally:
            driver.quit()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
