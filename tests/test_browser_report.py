"""The fleet report as a person sees it: rendered by headless Chromium.

Checks that the index and a case page are not blank and that every image on them
loaded (naturalWidth > 0). Where no Chromium is installed the test is skipped, saying
so; it never installs anything (CI's .ci/run installs Chromium on its own machine).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import powertrain as pt

pytestmark = [pytest.mark.slow, pytest.mark.system]

SPEC = """title = "browser check"
devices = ["orin-agx"]
batch_sizes = [16]
power_caps = [15, 30]
objectives = ["time"]
samples = 15

[workloads.resnet18]
source = "twin"
"""

#: marks <body> with one flag per image once the page (and every image) has loaded
PROBE = """<script>window.addEventListener("load", function () {
  var flags = Array.prototype.map.call(document.images, function (im) {
    return im.complete && im.naturalWidth > 0 ? "1" : "0"; });
  document.body.setAttribute("data-images-loaded", flags.join(""));
});</script>"""


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    found = os.environ.get("CHROMIUM") or _find_chromium()
    if not found:
        pytest.skip(
            "headless Chromium is not installed (none of chromium, chromium-browser, "
            "google-chrome, chrome on PATH, and no CHROMIUM=PATH): the rendered-report check "
            "is skipped; install one (e.g. apt-get install chromium) to run it"
        )
    return found


def _browser(chromium: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--allow-file-access-from-files",
        "--virtual-time-budget=10000",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _images_loaded(chromium: str, page: Path) -> tuple[int, str]:
    """(number of <img> on the page, one 1/0 flag per image as the browser saw it)."""
    text = page.read_text()
    probe = page.with_name(f".probe-{page.name}")
    probe.write_text(text.replace("</body>", PROBE + "</body>"))
    try:
        run = _browser(chromium, "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    assert run.returncode == 0, run.stderr[-2000:]
    flags = re.search(r'data-images-loaded="([01]*)"', run.stdout)
    assert flags, f"the probe never ran in {page}: {run.stdout[:300]}"
    return text.count("<img "), flags.group(1)


def _screenshot_spread(chromium: str, page: Path, tmp_path: Path) -> float:
    from matplotlib.image import imread

    shot = tmp_path / f"{page.parent.name}.png"
    run = _browser(chromium, f"--screenshot={shot}", "--window-size=1280,1000", page.as_uri())
    assert shot.exists(), run.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    return float(np.std(pixels))


@pytest.fixture(scope="module")
def report_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    (root / "spec.toml").write_text(SPEC)
    pt.report(root / "spec.toml", root / "out", n_jobs=1)
    return root / "out"


def test_index_and_a_case_page_render_with_every_image(chromium, report_folder, tmp_path):
    case_page = next((report_folder / "cases").glob("*/index.html"))
    for page in (report_folder / "index.html", case_page):
        n_images, flags = _images_loaded(chromium, page)
        assert n_images >= 1 and len(flags) == n_images, (page, flags)
        assert set(flags) == {"1"}, f"{page}: images not loaded: {flags}"
        assert _screenshot_spread(chromium, page, tmp_path) > 0.02, f"{page} renders blank"


def test_the_probe_sees_a_broken_image(chromium, report_folder, tmp_path):
    """The check above can fail: a page whose image is missing is reported as such."""
    page = report_folder / "broken.html"
    page.write_text('<html><body><h1>x</h1><img src="no-such.png"></body></html>')
    try:
        assert _images_loaded(chromium, page) == (1, "0")
    finally:
        page.unlink()
