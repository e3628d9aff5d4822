"""Render each report page (``reports/<name>/index.html``) in headless Chromium to a PNG,
``docs/screenshots/<name>.png``: what a reader of the repository sees, broken images included.

    python scripts/screenshot_reports.py [NAME ...] [--reports reports] [--out docs/screenshots]

Needs Chromium (Debian: ``apt-get install chromium``). Nothing is fetched: the pages link only
their own figure files, and the browser runs without network services, sync or updates.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser(given: str | None) -> str:
    for name in [given] if given else BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit(f"no Chromium found (tried {given or ', '.join(BROWSERS)}); Debian: apt-get install chromium")


def screenshot(browser: str, page: Path, png: Path, width: int, height: int, timeout: float) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)  # a stale file must not pass for a fresh one
    with tempfile.TemporaryDirectory(prefix="enigma-chromium-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png.resolve()}",
               page.resolve().as_uri()]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0 or not png.is_file():
        raise SystemExit(f"{page}: Chromium exited {run.returncode} without writing {png}:\n{run.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="report names (default: every reports/<name>/index.html)")
    ap.add_argument("--reports", type=Path, default=Path("reports"), help="the reports folder")
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"), help="where the PNGs go")
    ap.add_argument("--width", type=int, default=1280)
    # tall enough for the tables, the overview and the first estimator's figures of a full report
    ap.add_argument("--height", type=int, default=3600, help="window height: how much of the page is shown")
    ap.add_argument("--browser", default=None, help="Chromium executable (default: the first of %s on PATH)" % (BROWSERS,))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per page")
    a = ap.parse_args(argv)
    pages = [a.reports / n / "index.html" for n in a.names] if a.names else sorted(a.reports.glob("*/index.html"))
    missing = [p for p in pages if not p.is_file()]
    if missing or not pages:
        raise SystemExit(f"no report page at {', '.join(map(str, missing)) or a.reports / '*/index.html'}")
    browser = find_browser(a.browser)
    for page in pages:
        png = a.out / f"{page.parent.name}.png"
        screenshot(browser, page, png, a.width, a.height, a.timeout)
        print(f"{page} -> {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
