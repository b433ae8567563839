"""Publish the asv dashboard, serve it offline, and screenshot the c and speedup-family graphs into a folder.

    python tools/dashboard.py [--out .asv/screenshots] [--skip-publish]

Needs recorded results (`asv run ...` over some commits of main: see README) and Debian's chromium
(`apt-get update && apt-get install -y chromium`). `asv publish` writes .asv/html, whose page loads jQuery, flot,
bootstrap and three small plugins from public CDNs; this machine has no internet but the npm registry, so the
same files are fetched with `npm pack` (cached in ~/.cache/specdec/asv-vendor), copied to .asv/html/vendor/, and
every page is pointed at them (without the CDN builds' integrity hashes). The page is then served on 127.0.0.1
(its graphs load JSON, which a file:// page may not) and headless Chromium saves one PNG per graph in GRAPHS.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / ".asv" / "html"
CACHE = Path.home() / ".cache" / "specdec" / "asv-vendor"
# CDN address in asv's pages -> (npm package, file inside its tarball). stupid-table-plugin 1.0.1 is not on npm;
# 1.1.3 is the same plugin (the summary table's sorting).
VENDOR = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css":
        ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js":
        ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        ("flot@0.8.3", "jquery.flot.categories.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        ("flot@0.8.3", "jquery.flot.selection.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js":
        ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
}
# screenshot name -> the dashboard's address of the graph (asv's hash: benchmark?p-<param>=<value>)
GRAPHS = {
    "asv-c.png": "bench_drafts.DraftCost.track_c",
    "asv-time-ratio-k4.png": "bench_speedup.Speedup.track_time_ratio?p-k=4",
    "asv-time-ratio-k8.png": "bench_speedup.Speedup.track_time_ratio?p-k=8",
    "asv-verify-over-single.png": "bench_target.VerifyGrowth.track_verify_over_single",
}


def _fail(message: str) -> None:
    sys.exit(f"dashboard: error: {message}")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        _fail(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {tail}")
    return proc


def vendor(html: Path) -> int:
    """Copy every CDN file into html/vendor and point the pages at it; returns how many addresses were replaced."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = html / "vendor"
    dest.mkdir(exist_ok=True)
    local = {}
    for url, (package, member) in VENDOR.items():
        tgz = CACHE / (package.replace("@", "-") + ".tgz")
        if not tgz.is_file():
            if shutil.which("npm") is None:
                _fail("npm is not installed (apt-get install -y npm), and the page's libraries come from it")
            with tempfile.TemporaryDirectory() as tmp:
                _run(["npm", "pack", "--silent", package], cwd=tmp)
                shutil.move(next(Path(tmp).glob("*.tgz")), tgz)
        with tarfile.open(tgz) as tar:
            data = tar.extractfile(f"package/{member}").read()
        name = f"{package.split('@')[0]}-{Path(member).name}"
        (dest / name).write_bytes(data)
        local[url] = f"vendor/{name}"
    replaced = 0
    for page in html.glob("*.html"):
        text = page.read_text()
        for url, path in local.items():
            replaced += text.count(url)
            text = text.replace(url, path)
        # the pinned hashes are of the CDN's minified builds; npm ships flot unminified and a later stupidtable
        page.write_text(re.sub(r'\s+integrity="[^"]*"', "", text))
    return replaced


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(html: Path):
    """The folder on http://127.0.0.1:PORT for the block's length."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(html)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # up within 5 s
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    _fail("no chromium here (apt-get update && apt-get install -y chromium)")


def screenshot(browser: str, url: str, out: Path) -> None:
    # virtual-time-budget lets the page's scripts fetch its JSON and draw before the picture is taken
    _run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1200",
          "--virtual-time-budget=20000", f"--screenshot={out}", url], timeout=180)
    if not out.is_file() or out.stat().st_size == 0:
        _fail(f"chromium wrote no screenshot for {url}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / ".asv" / "screenshots"),
                    help="folder for the PNGs (default: .asv/screenshots, beside the dashboard; not docs/)")
    ap.add_argument("--skip-publish", action="store_true", help="use .asv/html as it is")
    args = ap.parse_args()
    browser = _chromium()
    if not args.skip_publish:
        _run([sys.executable, "-m", "asv", "publish"], cwd=ROOT)  # the asv of this interpreter, on PATH or not
    if not (HTML / "index.html").is_file():
        _fail(f"{HTML}/index.html is missing: record results (asv run) and run asv publish")
    print(f"{vendor(HTML)} CDN addresses pointed at {HTML / 'vendor'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with serve(HTML) as base:
        for name, graph in GRAPHS.items():
            screenshot(browser, f"{base}/index.html#{graph}", out / name)
            print(f"wrote {out / name}  ({graph})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
